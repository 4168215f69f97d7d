/* AVX-512F intrinsics the kernels use that SIMDe 0.8.2 does not provide, built from
 * 256-bit halves with intrinsics it does provide. Test build only (POSENC_SIMDE). */
#ifndef POSENC_SIMDE_COMPAT_H
#define POSENC_SIMDE_COMPAT_H

#if SIMDE_VERSION <= HEDLEY_VERSION_ENCODE(0, 8, 2)

static inline simde__m256 simde_mm512_cvtpd_ps(simde__m512d a) {
    simde__m128 lo = simde_mm256_cvtpd_ps(simde_mm512_castpd512_pd256(a));
    simde__m128 hi = simde_mm256_cvtpd_ps(simde_mm512_extractf64x4_pd(a, 1));
    return simde_mm256_set_m128(hi, lo);
}

static inline simde__m512d simde_mm512_cvtps_pd(simde__m256 a) {
    simde__m256d lo = simde_mm256_cvtps_pd(simde_mm256_castps256_ps128(a));
    simde__m256d hi = simde_mm256_cvtps_pd(simde_mm256_extractf128_ps(a, 1));
    return simde_mm512_insertf64x4(simde_mm512_castpd256_pd512(lo), hi, 1);
}

#endif
/* AVX-512 intrinsics of the JSON writer (json_f32_avx512.c, built with SIMDe's native aliases) that
 * SIMDe lacks, lane by lane. Test build only. */
#if defined(SIMDE_ENABLE_NATIVE_ALIASES)
#include <string.h>

static inline __m512i posenc_simde_mulhi_epu16(__m512i a, __m512i b) {
    uint16_t x[32], y[32];
    memcpy(x, &a, 64);
    memcpy(y, &b, 64);
    for (int i = 0; i < 32; i++) x[i] = (uint16_t)((uint32_t)x[i] * y[i] >> 16);
    memcpy(&a, x, 64);
    return a;
}
#define _mm512_mulhi_epu16 posenc_simde_mulhi_epu16

static inline __m512i posenc_simde_srai_epi64(__m512i a, int n) {
    int64_t x[8];
    memcpy(x, &a, 64);
    for (int i = 0; i < 8; i++) x[i] >>= n;
    memcpy(&a, x, 64);
    return a;
}
#define _mm512_srai_epi64 posenc_simde_srai_epi64

static inline __m512i posenc_simde_lzcnt_epi64(__m512i a) {
    uint64_t x[8];
    memcpy(x, &a, 64);
    for (int i = 0; i < 8; i++) x[i] = x[i] ? (uint64_t)__builtin_clzll(x[i]) : 64;
    memcpy(&a, x, 64);
    return a;
}
#define _mm512_lzcnt_epi64 posenc_simde_lzcnt_epi64

static inline __m128i posenc_simde_cvtepi64_epi8(__m512i a) {
    uint64_t x[8];
    uint8_t out[16] = {0};
    memcpy(x, &a, 64);
    for (int i = 0; i < 8; i++) out[i] = (uint8_t)x[i];
    __m128i r;
    memcpy(&r, out, 16);
    return r;
}
#define _mm512_cvtepi64_epi8 posenc_simde_cvtepi64_epi8

static inline __m512i posenc_simde_cvtepu32_epi64(__m256i a) {
    uint32_t x[8];
    uint64_t out[8];
    memcpy(x, &a, 32);
    for (int i = 0; i < 8; i++) out[i] = x[i];
    __m512i r;
    memcpy(&r, out, 64);
    return r;
}
#define _mm512_cvtepu32_epi64 posenc_simde_cvtepu32_epi64

static inline __m256i posenc_simde_maskz_loadu_epi32(__mmask8 k, const void *p) {
    uint32_t out[8] = {0};
    for (int i = 0; i < 8; i++)
        if (k >> i & 1) memcpy(&out[i], (const char *)p + 4 * i, 4);
    __m256i r;
    memcpy(&r, out, 32);
    return r;
}
#define _mm256_maskz_loadu_epi32 posenc_simde_maskz_loadu_epi32

#endif

#endif
