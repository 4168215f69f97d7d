/* The scalar "vector" layer: one double per vector, baseline x86-64 (or any CPU).
 * v_fmadd and friends are true fused multiply-adds (C99 fma: one rounding), as on the
 * AVX2 and AVX-512 paths, so every path rounds the same way and gives the same bits
 * (batch invariance across paths and CPUs). Without an FMA unit libm emulates it exactly. */
#ifndef POSENC_SIMD_SCALAR_H
#define POSENC_SIMD_SCALAR_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#define VW 1
typedef double vd;
typedef uint64_t vi;

static inline vd v_set1(double x) { return x; }
static inline vd v_load(const double *p) { double x; memcpy(&x, p, sizeof x); return x; }
static inline void v_store(double *p, vd x) { memcpy(p, &x, sizeof x); }
static inline vd v_add(vd a, vd b) { return a + b; }
static inline vd v_sub(vd a, vd b) { return a - b; }
static inline vd v_mul(vd a, vd b) { return a * b; }
static inline vd v_fmadd(vd a, vd b, vd c) { return fma(a, b, c); }   /* a*b + c */
static inline vd v_fnmadd(vd a, vd b, vd c) { return fma(-a, b, c); } /* c - a*b */
static inline vd v_fmsub(vd a, vd b, vd c) { return fma(a, b, -c); }  /* a*b - c */
static inline vd v_abs(vd a) { return a < 0 ? -a : a; }
static inline int v_all_le(vd a, vd b) { return a <= b; }
static inline vd v_select_le(vd a, vd b, vd x, vd y) { return a <= b ? x : y; }

static inline vi v_bits(vd a) { vi b; memcpy(&b, &a, sizeof b); return b; }
static inline vi vi_set1(int64_t x) { return (vi)x; }
static inline vi vi_add(vi a, vi b) { return a + b; }
static inline vi vi_and(vi a, vi b) { return a & b; }
#define vi_shl(a, n) ((vi)(a) << (n))
static inline vd v_xor_bits(vd a, vi bits) { vi b = v_bits(a) ^ bits; vd r; memcpy(&r, &b, sizeof r); return r; }
/* lanes whose sign bit of m is set take if_set */
static inline vd v_select_sign(vi m, vd if_set, vd if_clear) { return (m >> 63) ? if_set : if_clear; }

static inline vd v_load_f32(const float *p) { return (double)*p; }
static inline void v_store_f32(float *p, vd x) { *p = (float)x; }
/* Float32 "vectors" of one lane for the sin/cos rows' correct rounding: see simd_avx512.h. */
typedef float vf;
static inline vf v_to_f32(vd x) { return (float)x; }
static inline int vf_differ(vf a, vf b) { return memcmp(&a, &b, sizeof a) != 0; }
static inline void vf_store(float *p, vf x) { *p = x; }
static inline vf vf_load(const float *p) { return *p; }
/* Differing bits of two roundings, or-ed over a row group and tested once (see simd_avx512.h). */
static inline uint32_t vf_bits(vf a) { uint32_t b; memcpy(&b, &a, sizeof b); return b; }
static inline vf vf_of_bits(uint32_t b) { vf a; memcpy(&a, &b, sizeof a); return a; }
static inline vf vf_xor(vf a, vf b) { return vf_of_bits(vf_bits(a) ^ vf_bits(b)); }
static inline vf vf_or(vf a, vf b) { return vf_of_bits(vf_bits(a) | vf_bits(b)); }
static inline vf vf_zero(void) { return 0.0f; }
static inline int vf_any(vf x) { return vf_bits(x) != 0; }
static inline void vf_store_pair(float *p, vf a, vf b) { p[0] = a; p[1] = b; }
static inline void v_load_pair(const double *p, vd *a, vd *b) { *a = p[0]; *b = p[1]; }
static inline void v_store_pair(double *p, vd a, vd b) { p[0] = a; p[1] = b; }
static inline void v_load_pair_f32(const float *p, vd *a, vd *b) { *a = p[0]; *b = p[1]; }
static inline void v_store_pair_f32(float *p, vd a, vd b) { p[0] = (float)a; p[1] = (float)b; }

/* No non-temporal stores on the portable path: kernels never stream when V_STREAM is 0,
 * so these plain versions only keep the one kernel body compiling. */
#define V_STREAM 0
#define v_stream_f32 v_store_f32
#define v_stream v_store
#define vf_stream vf_store
#define vf_stream_pair vf_store_pair
#define v_stream_pair v_store_pair
static inline void v_stream_copy(void *dst, const void *src, size_t nbytes) { memcpy(dst, src, nbytes); }
static inline void v_stream_fence(void) {}
#define V_TILE_BLOCK_ROWS 0 /* never streams (V_STREAM 0) */

#endif
