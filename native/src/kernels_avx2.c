/* AVX2+FMA path: the kernel body compiled for Haswell/Zen-class CPUs. Only reached after
 * dispatch.c has checked CPUID and that the OS saves YMM state. */
#include "posenc_shm.h" /* first: it sets the feature macros its POSIX parts need */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC target("avx2,fma")
#endif

#include "simd_avx2.h"

#define POSENC_KERNELS posenc_kernels_avx2
#define POSENC_KERNELS_NAME "avx2"
#include "kernels_body.h"

#if defined(__clang__)
#pragma clang attribute pop
#endif
#else
typedef int posenc_no_avx2_on_this_architecture;
#endif
