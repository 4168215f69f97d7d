/* Scalar path: the kernel body for any CPU (the baseline, and the fallback everywhere). */
#include "posenc_shm.h" /* first: it sets the feature macros its POSIX parts need */
#include "simd_scalar.h"

#define POSENC_KERNELS posenc_kernels_scalar
#define POSENC_KERNELS_NAME "scalar"
#include "kernels_body.h"
