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
#endif
