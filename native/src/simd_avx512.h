/* The AVX-512F layer: eight doubles per vector. Included only under target("avx512f,...").
 *
 * Written once against the intrinsic names through X(): the native build uses the real
 * intrinsics; the test build (POSENC_SIMDE) uses SIMDe's portable implementations of the
 * same intrinsics, so this exact code runs in the test suite on CPUs without AVX-512. */
#ifndef POSENC_SIMD_AVX512_H
#define POSENC_SIMD_AVX512_H

#include <stddef.h>
#include <stdint.h>

#ifdef POSENC_SIMDE
#include <simde/x86/avx512.h>
#include "simde_compat.h"
#define X(name) simde##name
#define XT(type) simde##type
#define X_CMP_LE_OQ SIMDE_CMP_LE_OQ
#else
#include <immintrin.h>
#define X(name) name
#define XT(type) type
#define X_CMP_LE_OQ _CMP_LE_OQ
#endif

#define VW 8
typedef XT(__m512d) vd;
typedef XT(__m512i) vi;

static inline vd v_set1(double x) { return X(_mm512_set1_pd)(x); }
static inline vd v_load(const double *p) { return X(_mm512_loadu_pd)(p); }
static inline void v_store(double *p, vd x) { X(_mm512_storeu_pd)(p, x); }
static inline vd v_add(vd a, vd b) { return X(_mm512_add_pd)(a, b); }
static inline vd v_sub(vd a, vd b) { return X(_mm512_sub_pd)(a, b); }
static inline vd v_mul(vd a, vd b) { return X(_mm512_mul_pd)(a, b); }
static inline vd v_fmadd(vd a, vd b, vd c) { return X(_mm512_fmadd_pd)(a, b, c); }
static inline vd v_fnmadd(vd a, vd b, vd c) { return X(_mm512_fnmadd_pd)(a, b, c); }
static inline vd v_fmsub(vd a, vd b, vd c) { return X(_mm512_fmsub_pd)(a, b, c); }
static inline vd v_abs(vd a) { return X(_mm512_abs_pd)(a); }
static inline int v_all_le(vd a, vd b) { return X(_mm512_cmp_pd_mask)(a, b, X_CMP_LE_OQ) == 0xFF; }
static inline vd v_select_le(vd a, vd b, vd x, vd y) {
    return X(_mm512_mask_blend_pd)(X(_mm512_cmp_pd_mask)(a, b, X_CMP_LE_OQ), y, x);
}

static inline vi v_bits(vd a) { return X(_mm512_castpd_si512)(a); }
static inline vi vi_set1(int64_t x) { return X(_mm512_set1_epi64)(x); }
static inline vi vi_add(vi a, vi b) { return X(_mm512_add_epi64)(a, b); }
static inline vi vi_and(vi a, vi b) { return X(_mm512_and_si512)(a, b); }
#define vi_shl(a, n) X(_mm512_slli_epi64)((a), (n))
static inline vd v_xor_bits(vd a, vi bits) {
    return X(_mm512_castsi512_pd)(X(_mm512_xor_si512)(X(_mm512_castpd_si512)(a), bits));
}
static inline vd v_select_sign(vi m, vd if_set, vd if_clear) {
    return X(_mm512_mask_blend_pd)(X(_mm512_test_epi64_mask)(m, vi_set1(INT64_MIN)), if_clear, if_set);
}

static inline vd v_load_f32(const float *p) { return X(_mm512_cvtps_pd)(X(_mm256_loadu_ps)(p)); }
static inline void v_store_f32(float *p, vd x) { X(_mm256_storeu_ps)(p, X(_mm512_cvtpd_ps)(x)); }

/* Float32 vectors (VW floats) for the sin/cos rows' correct rounding (kernels_body.h emit_f32):
 * the rounding of x - err is what is stored, compared first with that of x + err. */
typedef XT(__m256) vf;
static inline vf v_to_f32(vd x) { return X(_mm512_cvtpd_ps)(x); }
/* lanes where a and b differ, bit for bit (-0 and +0 differ) */
static inline int vf_differ(vf a, vf b) {
    return ~X(_mm256_movemask_ps)(X(_mm256_castsi256_ps)(
               X(_mm256_cmpeq_epi32)(X(_mm256_castps_si256)(a), X(_mm256_castps_si256)(b)))) & 0xFF;
}
static inline void vf_store(float *p, vf x) { X(_mm256_storeu_ps)(p, x); }
static inline vf vf_load(const float *p) { return X(_mm256_loadu_ps)(p); }
/* Differing bits of two roundings, or-ed over a row group and tested once (kernels_body.h emit). */
static inline vf vf_xor(vf a, vf b) { return X(_mm256_xor_ps)(a, b); }
static inline vf vf_or(vf a, vf b) { return X(_mm256_or_ps)(a, b); }
static inline vf vf_zero(void) { return X(_mm256_setzero_ps)(); }
static inline int vf_any(vf x) { return !X(_mm256_testz_si256)(X(_mm256_castps_si256)(x), X(_mm256_castps_si256)(x)); }

static inline void v_load_pair(const double *p, vd *a, vd *b) {
    vd lo = X(_mm512_loadu_pd)(p), hi = X(_mm512_loadu_pd)(p + 8);
    *a = X(_mm512_permutex2var_pd)(lo, X(_mm512_set_epi64)(14, 12, 10, 8, 6, 4, 2, 0), hi);
    *b = X(_mm512_permutex2var_pd)(lo, X(_mm512_set_epi64)(15, 13, 11, 9, 7, 5, 3, 1), hi);
}
/* index vectors interleaving two vectors' lanes: a0 b0 a1 b1 ... (low and high halves) */
#define PAIR_LO X(_mm512_set_epi64)(11, 3, 10, 2, 9, 1, 8, 0)
#define PAIR_HI X(_mm512_set_epi64)(15, 7, 14, 6, 13, 5, 12, 4)
static inline void v_store_pair(double *p, vd a, vd b) {
    X(_mm512_storeu_pd)(p, X(_mm512_permutex2var_pd)(a, PAIR_LO, b));
    X(_mm512_storeu_pd)(p + 8, X(_mm512_permutex2var_pd)(a, PAIR_HI, b));
}
static inline void v_load_pair_f32(const float *p, vd *a, vd *b) {
    /* a0 b0 a1 b1 ... -> [a0..a7 | b0..b7] */
    XT(__m512) v = X(_mm512_permutexvar_ps)(
        X(_mm512_set_epi32)(15, 13, 11, 9, 7, 5, 3, 1, 14, 12, 10, 8, 6, 4, 2, 0), X(_mm512_loadu_ps)(p));
    vd halves = X(_mm512_castps_pd)(v);
    *a = X(_mm512_cvtps_pd)(X(_mm256_castpd_ps)(X(_mm512_castpd512_pd256)(halves)));
    *b = X(_mm512_cvtps_pd)(X(_mm256_castpd_ps)(X(_mm512_extractf64x4_pd)(halves, 1)));
}
/* float32 a0 b0 a1 b1 ... a7 b7 */
static inline XT(__m512) interleave_vf(vf a, vf b) {
    vd halves = X(_mm512_insertf64x4)(X(_mm512_castpd256_pd512)(X(_mm256_castps_pd)(a)), X(_mm256_castps_pd)(b), 1);
    return X(_mm512_permutexvar_ps)(X(_mm512_set_epi32)(15, 7, 14, 6, 13, 5, 12, 4, 11, 3, 10, 2, 9, 1, 8, 0),
                                    X(_mm512_castpd_ps)(halves));
}
static inline void vf_store_pair(float *p, vf a, vf b) { X(_mm512_storeu_ps)(p, interleave_vf(a, b)); }
static inline void v_store_pair_f32(float *p, vd a, vd b) { vf_store_pair(p, v_to_f32(a), v_to_f32(b)); }

/* Non-temporal (streaming) stores, in 16-byte pieces (see simd_avx2.h). */
#define V_STREAM 1
static inline void stream_4x16(float *p, XT(__m512) v) {
    X(_mm_stream_ps)(p, X(_mm512_extractf32x4_ps)(v, 0));
    X(_mm_stream_ps)(p + 4, X(_mm512_extractf32x4_ps)(v, 1));
    X(_mm_stream_ps)(p + 8, X(_mm512_extractf32x4_ps)(v, 2));
    X(_mm_stream_ps)(p + 12, X(_mm512_extractf32x4_ps)(v, 3));
}
static inline void vf_stream(float *p, vf f) {
    X(_mm_stream_ps)(p, X(_mm256_castps256_ps128)(f));
    X(_mm_stream_ps)(p + 4, X(_mm256_extractf128_ps)(f, 1));
}
static inline void v_stream_f32(float *p, vd x) { vf_stream(p, v_to_f32(x)); }
static inline void v_stream(double *p, vd x) { stream_4x16((float *)p, X(_mm512_castpd_ps)(x)); }
static inline void vf_stream_pair(float *p, vf a, vf b) { stream_4x16(p, interleave_vf(a, b)); }
static inline void v_stream_pair(double *p, vd a, vd b) {
    stream_4x16((float *)p, X(_mm512_castpd_ps)(X(_mm512_permutex2var_pd)(a, PAIR_LO, b)));
    stream_4x16((float *)(p + 8), X(_mm512_castpd_ps)(X(_mm512_permutex2var_pd)(a, PAIR_HI, b)));
}
/* nbytes a multiple of 16 at a 16-byte aligned dst: once dst reaches a 64-byte boundary, one
 * 512-bit store per cache line (the copy-out of sincos_rows_crc's tiles ran ~1.2x faster so
 * than in 16-byte pieces here). SIMDe lacks the 512-bit streaming store: its build streams
 * every piece in 16 bytes, the same bytes. */
static inline void stream_16(char *dst, const char *src) {
    X(_mm_stream_ps)((float *)dst, X(_mm_loadu_ps)((const float *)src));
}
static inline void v_stream_copy(void *dst, const void *src, size_t nbytes) {
    char *d = (char *)dst;
    const char *s = (const char *)src;
    size_t k = 0;
    for (; k < nbytes && ((uintptr_t)(d + k) & 63); k += 16)
        stream_16(d + k, s + k);
#ifndef POSENC_SIMDE
    for (; k + 64 <= nbytes; k += 64)
        _mm512_stream_si512((void *)(d + k), _mm512_loadu_si512((const void *)(s + k)));
#endif
    for (; k < nbytes; k += 16)
        stream_16(d + k, s + k);
}
static inline void v_stream_fence(void) { X(_mm_sfence)(); }
/* Whole rows go through the L1 tile and out in one run from the first line boundary (see
 * simd_avx2.h): stored straight out, 16 bytes at a time, into numpy's own buffers (16 bytes past
 * a line) RoPE 131072 x 64 x 2 float32 took 34 ms against 4.0 ms aligned on Zen 4, sinusoidal
 * rows 7.0 ms against 3.3; through the tile every offset 0/16/32/48 takes 3.9-4.4 ms. */
#define V_TILE_BLOCK_ROWS 1
/* One row per pass (kernels_body.h ROWS_PER_PASS): on Zen 4 the four-row body, with its float32
 * roundings and checks, ran slower than one row at a time (131072 x 64 frequencies float32 into
 * 64 MiB, A/B alternated, three rounds of 11: RoPE rows 0.87-1.04x the time, sinusoidal rows
 * 0.86-0.96x; in cache, 4096 rows 32 times: sinusoidal 0.93x, RoPE 1.00x). AVX2 keeps four (one
 * row there: 1.05-1.11x the time). */
#define V_ROWS_PER_PASS 1

#endif
