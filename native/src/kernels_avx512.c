/* AVX-512F path: the kernel body with eight doubles per vector. Only reached after
 * dispatch.c has checked CPUID and that the OS saves ZMM and mask state.
 *
 * Compiled a second time, for tests only, with -DPOSENC_SIMDE: simd_avx512.h then maps the
 * same intrinsics to SIMDe's portable versions and the table is exported as
 * posenc_kernels_avx512_simde (see tests/native/conftest.py). */
#include "posenc_shm.h" /* first: it sets the feature macros its POSIX parts need */
#if defined(POSENC_SIMDE)
#include "simd_avx512.h"

#define POSENC_KERNELS posenc_kernels_avx512_simde
#define POSENC_KERNELS_NAME "avx512-simde"
#define POSENC_KERNELS_VISIBILITY "default"
#include "kernels_body.h"

#elif defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx2,fma"))), apply_to = function)
#else
#pragma GCC target("avx512f,avx2,fma")
#endif

#include "simd_avx512.h"

#define POSENC_KERNELS posenc_kernels_avx512
#define POSENC_KERNELS_NAME "avx512"
#include "kernels_body.h"

#if defined(__clang__)
#pragma clang attribute pop
#endif
#else
typedef int posenc_no_avx512_on_this_architecture;
#endif
