/* The AVX2+FMA layer: four doubles per vector. Included only under target("avx2,fma"). */
#ifndef POSENC_SIMD_AVX2_H
#define POSENC_SIMD_AVX2_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#define VW 4
typedef __m256d vd;
typedef __m256i vi;

static inline vd v_set1(double x) { return _mm256_set1_pd(x); }
static inline vd v_load(const double *p) { return _mm256_loadu_pd(p); }
static inline void v_store(double *p, vd x) { _mm256_storeu_pd(p, x); }
static inline vd v_add(vd a, vd b) { return _mm256_add_pd(a, b); }
static inline vd v_sub(vd a, vd b) { return _mm256_sub_pd(a, b); }
static inline vd v_mul(vd a, vd b) { return _mm256_mul_pd(a, b); }
static inline vd v_fmadd(vd a, vd b, vd c) { return _mm256_fmadd_pd(a, b, c); }
static inline vd v_fnmadd(vd a, vd b, vd c) { return _mm256_fnmadd_pd(a, b, c); }
static inline vd v_fmsub(vd a, vd b, vd c) { return _mm256_fmsub_pd(a, b, c); }
static inline vd v_abs(vd a) { return _mm256_andnot_pd(_mm256_set1_pd(-0.0), a); }
static inline int v_all_le(vd a, vd b) { return _mm256_movemask_pd(_mm256_cmp_pd(a, b, _CMP_LE_OQ)) == 0xF; }
static inline vd v_select_le(vd a, vd b, vd x, vd y) { return _mm256_blendv_pd(y, x, _mm256_cmp_pd(a, b, _CMP_LE_OQ)); }

static inline vi v_bits(vd a) { return _mm256_castpd_si256(a); }
static inline vi vi_set1(int64_t x) { return _mm256_set1_epi64x(x); }
static inline vi vi_add(vi a, vi b) { return _mm256_add_epi64(a, b); }
static inline vi vi_and(vi a, vi b) { return _mm256_and_si256(a, b); }
#define vi_shl(a, n) _mm256_slli_epi64((a), (n))
static inline vd v_xor_bits(vd a, vi bits) { return _mm256_castsi256_pd(_mm256_xor_si256(_mm256_castpd_si256(a), bits)); }
static inline vd v_select_sign(vi m, vd if_set, vd if_clear) { return _mm256_blendv_pd(if_clear, if_set, _mm256_castsi256_pd(m)); }

static inline vd v_load_f32(const float *p) { return _mm256_cvtps_pd(_mm_loadu_ps(p)); }
static inline void v_store_f32(float *p, vd x) { _mm_storeu_ps(p, _mm256_cvtpd_ps(x)); }

/* Float32 vectors (VW floats) for the sin/cos rows' correct rounding: see simd_avx512.h. */
typedef __m128 vf;
static inline vf v_to_f32(vd x) { return _mm256_cvtpd_ps(x); }
static inline int vf_differ(vf a, vf b) {
    return ~_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(_mm_castps_si128(a), _mm_castps_si128(b)))) & 0xF;
}
static inline void vf_store(float *p, vf x) { _mm_storeu_ps(p, x); }
static inline vf vf_load(const float *p) { return _mm_loadu_ps(p); }
/* Differing bits of two roundings, or-ed over a row group and tested once (see simd_avx512.h). */
static inline vf vf_xor(vf a, vf b) { return _mm_xor_ps(a, b); }
static inline vf vf_or(vf a, vf b) { return _mm_or_ps(a, b); }
static inline vf vf_zero(void) { return _mm_setzero_ps(); }
static inline int vf_any(vf x) { return !_mm_testz_si128(_mm_castps_si128(x), _mm_castps_si128(x)); }

static inline void v_load_pair(const double *p, vd *a, vd *b) {
    vd lo = _mm256_loadu_pd(p), hi = _mm256_loadu_pd(p + 4);           /* a0 b0 a1 b1 | a2 b2 a3 b3 */
    vd t0 = _mm256_permute2f128_pd(lo, hi, 0x20), t1 = _mm256_permute2f128_pd(lo, hi, 0x31);
    *a = _mm256_unpacklo_pd(t0, t1);
    *b = _mm256_unpackhi_pd(t0, t1);
}
static inline void v_store_pair(double *p, vd a, vd b) {
    vd lo = _mm256_unpacklo_pd(a, b), hi = _mm256_unpackhi_pd(a, b);  /* a0 b0 a2 b2 | a1 b1 a3 b3 */
    _mm256_storeu_pd(p, _mm256_permute2f128_pd(lo, hi, 0x20));
    _mm256_storeu_pd(p + 4, _mm256_permute2f128_pd(lo, hi, 0x31));
}
static inline void v_load_pair_f32(const float *p, vd *a, vd *b) {
    __m256 v = _mm256_loadu_ps(p);
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    *a = _mm256_cvtps_pd(_mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)));
    *b = _mm256_cvtps_pd(_mm_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1)));
}
static inline void vf_store_pair(float *p, vf fa, vf fb) {
    _mm256_storeu_ps(p, _mm256_set_m128(_mm_unpackhi_ps(fa, fb), _mm_unpacklo_ps(fa, fb)));
}
static inline void v_store_pair_f32(float *p, vd a, vd b) { vf_store_pair(p, v_to_f32(a), v_to_f32(b)); }

/* Non-temporal (streaming) stores for outputs far bigger than the caches: no read-for-
 * ownership, so a byte written costs one memory transfer instead of two. All in 16-byte
 * pieces: destinations need only 16-byte alignment (what malloc and numpy give; the kernels
 * check). v_stream_copy: nbytes a multiple of 16. */
#define V_STREAM 1
static inline void vf_stream(float *p, vf f) { _mm_stream_ps(p, f); }
static inline void v_stream_f32(float *p, vd x) { vf_stream(p, v_to_f32(x)); }
static inline void v_stream(double *p, vd x) {
    _mm_stream_pd(p, _mm256_castpd256_pd128(x));
    _mm_stream_pd(p + 2, _mm256_extractf128_pd(x, 1));
}
static inline void vf_stream_pair(float *p, vf fa, vf fb) {
    _mm_stream_ps(p, _mm_unpacklo_ps(fa, fb));
    _mm_stream_ps(p + 4, _mm_unpackhi_ps(fa, fb));
}
static inline void v_stream_pair(double *p, vd a, vd b) {
    vd lo = _mm256_unpacklo_pd(a, b), hi = _mm256_unpackhi_pd(a, b); /* a0 b0 a2 b2 | a1 b1 a3 b3 */
    _mm_stream_pd(p, _mm256_castpd256_pd128(lo));
    _mm_stream_pd(p + 2, _mm256_castpd256_pd128(hi));
    _mm_stream_pd(p + 4, _mm256_extractf128_pd(lo, 1));
    _mm_stream_pd(p + 6, _mm256_extractf128_pd(hi, 1));
}
/* nbytes a multiple of 16 at a 16-byte aligned dst: once dst reaches a 64-byte boundary, two
 * 256-bit stores per cache line, one line after the other. */
static inline void v_stream_copy(void *dst, const void *src, size_t nbytes) {
    char *d = (char *)dst;
    const char *s = (const char *)src;
    size_t k = 0;
    for (; k < nbytes && ((uintptr_t)(d + k) & 63); k += 16)
        _mm_stream_ps((float *)(d + k), _mm_loadu_ps((const float *)(s + k)));
    for (; k + 64 <= nbytes; k += 64) {
        __m256 lo = _mm256_loadu_ps((const float *)(s + k)), hi = _mm256_loadu_ps((const float *)(s + k + 32));
        _mm256_stream_ps((float *)(d + k), lo);
        _mm256_stream_ps((float *)(d + k + 32), hi);
    }
    for (; k < nbytes; k += 16)
        _mm_stream_ps((float *)(d + k), _mm_loadu_ps((const float *)(s + k)));
}
/* Whole rows (dense layouts: [sin | cos], [cos | sin] or interleaved) go through an L1 tile and
 * out in one run (STREAM_TILE in kernels_body.h) rather than straight out: the direct stores,
 * 16 bytes each, feed several partial cache lines at once, and where rows do not start on a
 * 64-byte boundary (numpy's big arrays start 16 bytes past one) lines are flushed half written:
 * RoPE 131072 x 64 x 2 float32 took 1.45x as long as into an aligned buffer on Zen 2, interleaved
 * sinusoidal rows 1.6x on Zen 4; through the tile every offset runs alike (docs/benchmarks.md). */
#define V_TILE_BLOCK_ROWS 1
static inline void v_stream_fence(void) { _mm_sfence(); }

#endif
