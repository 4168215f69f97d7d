/* posenc native core: positional-encoding kernels with run-time ISA dispatch.
 *
 * One shared library, three code paths (scalar, AVX2+FMA, AVX-512F) stamped from one
 * kernel body. The path is chosen once, when the library loads: the best one the CPU and
 * OS support, or the one named by the environment variable POSENC_ISA (scalar|avx2|avx512).
 * Forcing a path the CPU cannot run leaves no active path: every entry point then returns
 * POSENC_ENOISA and posenc_dispatch_error() says why. POSENC_DEBUG=1 prints the choice.
 *
 * Conventions: arrays are C-contiguous, counts and strides are in elements (not bytes)
 * and int64_t, float64 math throughout, output dtype POSENC_F32 or POSENC_F64. Kernels
 * never allocate more than O(width) scratch, never call back into the caller, and are
 * thread-safe (no shared mutable state), so callers may split rows across threads.
 * sincos_rows and alibi_bias write outputs of 8 MiB or more per call with non-temporal
 * stores (16-byte aligned outputs only): the result is then in memory, not in the cache.
 */
#ifndef POSENC_H
#define POSENC_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define POSENC_API __declspec(dllexport)
#else
#define POSENC_API __attribute__((visibility("default")))
#endif

/* Return codes. */
enum {
    POSENC_OK = 0,
    POSENC_ENOMEM = -1, /* scratch allocation failed */
    POSENC_EINVAL = -2, /* bad argument (dtype, counts, layout) */
    POSENC_ERANGE = -3, /* gather: a row index outside the table */
    POSENC_ENOISA = -4  /* no active path (POSENC_ISA forced one this CPU cannot run) */
};

/* Element types of outputs (and of q/k for rope_rotate). */
enum { POSENC_F32 = 0, POSENC_F64 = 1 };

/* ALiBi modes: causal -m(i-j) (-inf for j > i), symmetric -m|i-j|, bloom m*j. */
enum { POSENC_ALIBI_CAUSAL = 0, POSENC_ALIBI_SYMMETRIC = 1, POSENC_ALIBI_BLOOM = 2 };

/* Where row r's values for frequency i go (offsets in elements from the output pointer):
 *   interleaved != 0: sin at r*row_stride + 2i, cos at r*row_stride + 2i + 1
 *   interleaved == 0: sin at r*row_stride + sin_base + i, cos at r*row_stride + cos_base + i
 * Only frequencies i < n_cos get a cos value; the rest (odd widths) get a lone sin.
 * sin_base/cos_base may point into a second block (e.g. a [2, n, n_freq] cos/sin pair). */
typedef struct posenc_layout {
    int64_t row_stride;
    int64_t sin_base;
    int64_t cos_base;
    int64_t n_cos;
    int32_t interleaved;
    int32_t reserved; /* must be 0 */
} posenc_layout;

/* amp_i*sin(p_r*w_i) and amp_i*cos(p_r*w_i) for n_rows positions and n_sin frequencies.
 *
 * Batch invariance: every value is a pure function of (p_r, w_i, amp_i) -- the same whatever
 * the other positions of the call, their order, the row range a caller splits a job into, the
 * code path (scalar, AVX2, AVX-512, and posenc's numba kernels) or the CPU. Definition:
 *   integer p (|p| < 2^53): coarse = 1024*floor(p/1024), mid = 16*floor((p - coarse)/16),
 *     fine = p - coarse - mid; with (s_x, c_x) = sincos(x*w) for each part x, of the exact
 *     product x*w (never rounded to one float64),
 *     (S, C) = (fma(s_c, c_m, c_c*s_m), fma(c_c, c_m, -(s_c*s_m))) then (A, B) = (amp*S, amp*C),
 *     sin = fma(A, c_f, B*s_f), cos = fma(B, c_f, -(A*s_f))
 *   other p: sin = amp*s_p, cos = amp*c_p with (s_p, c_p) = sincos(p*w), the product exact
 * where sincos is src/vsincos.h: x*w as a double-double, reduced exactly modulo pi/2 with
 * error-free transformations (reduced angle within 2^-90 of the true one for |x*w| <= 2^62),
 * fdlibm polynomials plus the low part's first-order term, within 1 ulp of the exact sin and
 * cos plus that 2^-90 (libm on the two halves beyond 2^62). Each part is exact, so the
 * float64 value is within a few 2^-53 of amp*sin(p*w) at every magnitude; parts repeat across
 * rows, so contiguous ranges cost about one angle addition per value (no per-call recurrence
 * state that a neighbour could disturb). */
typedef int (*posenc_sincos_rows_fn)(const double *positions, int64_t n_rows, const double *freqs,
                                     const double *amp, int64_t n_sin, const posenc_layout *layout,
                                     void *out, int dtype);

/* sincos_rows that also continues *crc, the CRC-32C (Castagnoli, as posenc_shm.h computes it)
 * of the bytes before `out`, over the rows it writes: *crc is then the CRC-32C of the
 * n_rows * row_stride elements from `out` as they lie in memory, continuing its value on
 * entry (0 to start). The rows must be whole and back to back (row_stride == n_sin + n_cos,
 * blocks [sin | cos] or [cos | sin] filling the row, or interleaved with at most the last
 * column a lone sin), else POSENC_EINVAL; the values are sincos_rows' bit for bit. Each tile
 * of rows is checksummed while it is in L1, before it is stored (streamed from 8 MiB on),
 * so the output is not read back: one pass over memory for rows and checksum. crc NULL:
 * POSENC_EINVAL. */
typedef int (*posenc_sincos_rows_crc_fn)(const double *positions, int64_t n_rows, const double *freqs,
                                         const double *amp, int64_t n_sin, const posenc_layout *layout,
                                         void *out, int dtype, uint32_t *crc);

/* Rotate x [batch, n_rows, head_dim] (element (b, r, j) at b*batch_stride + r*head_dim + j)
 * by cos/sin [n_rows, n_freq] (float64, already scaled): pairs (i, i + n_freq) when
 * interleaved == 0 (NeoX/Llama rotate_half), (2i, 2i+1) otherwise (GPT-J); dims past
 * 2*n_freq are copied. out may equal x (in place). x and out have dtype `dtype`. */
typedef int (*posenc_rope_rotate_fn)(const void *x, void *out, int64_t batch, int64_t batch_stride,
                                     int64_t n_rows, int64_t head_dim, const double *cos,
                                     const double *sin, int64_t n_freq, int interleaved, int dtype);

/* ALiBi bias out[h, a, b] (element at h*head_stride + a*k_len + b) for slopes[n_heads],
 * query positions q_pos[q_len] and key positions k_pos[k_len]; mode POSENC_ALIBI_*. */
typedef int (*posenc_alibi_bias_fn)(const double *slopes, int64_t n_heads, const double *q_pos,
                                    int64_t q_len, const double *k_pos, int64_t k_len, int mode,
                                    void *out, int64_t head_stride, int dtype);

/* out[k] = table[rows[k]] for k < n, rows of row_bytes bytes; rows are checked against
 * n_table_rows first (POSENC_ERANGE, nothing written, *bad_k = first bad k if non-NULL). */
typedef int (*posenc_gather_rows_fn)(const void *table, int64_t n_table_rows, int64_t row_bytes,
                                     const int64_t *rows, int64_t n, void *out, int64_t *bad_k);

/* A path's sincos plan (see posenc_sincos_plan below): new returns an opaque handle or NULL. */
typedef void *(*posenc_sincos_plan_new_fn)(const double *freqs, const double *amp, int64_t n_sin);
typedef int (*posenc_sincos_plan_rows_fn)(void *plan, const double *positions, int64_t n_rows,
                                          const posenc_layout *layout, void *out, int dtype);
typedef void (*posenc_sincos_plan_free_fn)(void *plan);

/* One code path: a const table of kernels. */
typedef struct posenc_kernels {
    const char *name; /* "scalar", "avx2", "avx512" (or "avx512-simde" in the emulated test build) */
    posenc_sincos_rows_fn sincos_rows;
    posenc_rope_rotate_fn rope_rotate;
    posenc_alibi_bias_fn alibi_bias;
    posenc_gather_rows_fn gather_rows;
    posenc_sincos_rows_crc_fn sincos_rows_crc;
    posenc_sincos_plan_new_fn sincos_plan_new;
    posenc_sincos_plan_rows_fn sincos_plan_rows;
    posenc_sincos_plan_free_fn sincos_plan_free;
} posenc_kernels;

/* Bumped whenever a signature or struct above changes, or the values sincos_rows defines. */
#define POSENC_ABI_VERSION 6

/* Correct rounding: every float32 value sincos_rows (and its crc and plan forms) writes is the
 * exact amp*sin(p*w) (resp. cos; p, w, amp the float64 arguments as exact numbers) rounded once to
 * nearest. The float64 value y defined above is within POSENC_SINCOS_ERROR*|amp| of the exact one
 * (docs/library.md, "Correct rounding", proves 14 * 2^-53; the margin absorbs the rounding of
 * y +- that bound and part sincos twice as far off as the proof assumes), so where y - bound and y + bound round to the same float32, that is the answer; the few
 * values where they do not are recomputed exactly (posenc_crtrig.h). float64 output is y. */
#define POSENC_SINCOS_ERROR 0x1p-48

/* The absolute split of integer positions (see posenc_sincos_rows_fn). */
#define POSENC_SPLIT_COARSE 1024
#define POSENC_SPLIT_FINE 16

/* ---- dispatch queries ----------------------------------------------------------------- */

/* The active path's name, or NULL when there is none (see posenc_dispatch_error). */
POSENC_API const char *posenc_isa(void);
/* Why there is no active path ("" when there is one). */
POSENC_API const char *posenc_dispatch_error(void);
/* Space-separated CPU features that matter here, as detected (e.g. "sse2 avx avx2 fma os-ymm"). */
POSENC_API const char *posenc_cpu_features(void);
/* The kernels of one path ("scalar", "avx2", "avx512"), or NULL if this CPU cannot run it
 * or it was not compiled in. For tests and benchmarks; callers normally use the entry points. */
POSENC_API const posenc_kernels *posenc_kernels_for(const char *isa);
/* The active path's kernels, or NULL. */
POSENC_API const posenc_kernels *posenc_active_kernels(void);
/* POSENC_ABI_VERSION of the library actually loaded: bindings refuse a stale build. */
POSENC_API int posenc_abi_version(void);

/* ---- entry points (the active path) --------------------------------------------------- */

POSENC_API int posenc_sincos_rows(const double *positions, int64_t n_rows, const double *freqs,
                                  const double *amp, int64_t n_sin, const posenc_layout *layout,
                                  void *out, int dtype);
POSENC_API int posenc_sincos_rows_crc(const double *positions, int64_t n_rows, const double *freqs,
                                      const double *amp, int64_t n_sin, const posenc_layout *layout,
                                      void *out, int dtype, uint32_t *crc);
POSENC_API int posenc_rope_rotate(const void *x, void *out, int64_t batch, int64_t batch_stride,
                                  int64_t n_rows, int64_t head_dim, const double *cos,
                                  const double *sin, int64_t n_freq, int interleaved, int dtype);
POSENC_API int posenc_alibi_bias(const double *slopes, int64_t n_heads, const double *q_pos,
                                 int64_t q_len, const double *k_pos, int64_t k_len, int mode,
                                 void *out, int64_t head_stride, int dtype);
POSENC_API int posenc_gather_rows(const void *table, int64_t n_table_rows, int64_t row_bytes,
                                  const int64_t *rows, int64_t n, void *out, int64_t *bad_k);

/* ---- plans: sincos_rows for fixed frequencies, called again and again ----------------------- */

/* sincos_rows with fixed (freqs, amp, n_sin) whose scratch and part caches (the sincos rows of
 * the 16 fine and 64 mid parts, the last coarse part and anchor) persist between calls, for a
 * caller that computes a few rows at a time for the same spec (posenc-server's named computed
 * tables): a row of a random integer position costs its coarse part's sincos and two angle
 * additions, where sincos_rows pays for scratch and three part sincos every call. The values are
 * sincos_rows' bit for bit (the caches hold what sincos_rows would compute); rows are written with
 * ordinary stores, whatever their size. freqs and amp are copied. A plan is not thread-safe: one
 * per thread. new: NULL when n_sin < 1, memory is short or there is no active path. */
typedef struct posenc_sincos_plan posenc_sincos_plan;
POSENC_API posenc_sincos_plan *posenc_sincos_plan_new(const double *freqs, const double *amp, int64_t n_sin);
/* Rows for n_rows positions in `layout` (its n_cos <= the plan's n_sin), dtype POSENC_F32/F64. */
POSENC_API int posenc_sincos_plan_rows(posenc_sincos_plan *plan, const double *positions, int64_t n_rows,
                                       const posenc_layout *layout, void *out, int dtype);
POSENC_API void posenc_sincos_plan_free(posenc_sincos_plan *plan);

/* ---- JSON text (src/json_f32.c; not in the kernel tables) ------------------------------ */

/* The JSON text of a C-contiguous float32 array of `ndim` dimensions (0 to 64; 0: one number),
 * byte for byte what orjson 3.13 prints for the same numpy array: nested lists without spaces,
 * NaN and +-inf as null, each number the shortest decimal that reads back as the same float32
 * (the closest such, ties to even digits), in orjson's notation (docs/http.md, "Numbers in JSON").
 * An array without elements prints its empty lists ("[]", "[[],[]]" for shape (2, 0)).
 * Returns the text's length; or, when capacity < posenc_json_f32_capacity(shape, ndim), minus
 * that capacity (always at least 48, so never an error code), with nothing written; or
 * POSENC_EINVAL for a bad shape (a negative extent, over 64 dimensions, or over 2^55 elements). The buffer needs the capacity, not only the length:
 * numbers are laid out with fixed-size stores that run up to 48 bytes past the text's end. */
POSENC_API int64_t posenc_json_f32(const float *values, const int64_t *shape, int ndim, char *out,
                                   int64_t capacity);
/* posenc_json_f32 with its arguments in two structs, for bindings where each argument of a call
 * costs (ctypes: ~0.1 us each, as much as printing 20 numbers). posenc_json_array is laid out like
 * the head of numpy's ndarray object (PyArrayObject_fields, numpy/ndarraytypes.h: the two words of
 * the object header, then data, nd, dimensions), so a binding may pass an ndarray's own address
 * once it has checked that layout; other callers fill one in (object_head unused). */
typedef struct posenc_json_array {
    const void *object_head[2];
    const float *data;
    int32_t ndim;
    const int64_t *shape;
} posenc_json_array;
typedef struct posenc_json_buffer {
    char *data;
    int64_t capacity;
} posenc_json_buffer;
POSENC_API int64_t posenc_json_f32_array(const posenc_json_array *array, const posenc_json_buffer *out);
/* The buffer posenc_json_f32 needs for this shape (at least 48), or POSENC_EINVAL. */
POSENC_API int64_t posenc_json_f32_capacity(const int64_t *shape, int ndim);
/* The writer posenc_json_f32 uses: "avx512" where the active kernel path is AVX-512 and the CPU
 * also has AVX-512 BW, DQ, CD and VL; else "scalar" (there is no AVX2 writer: see json_f32.c). */
POSENC_API const char *posenc_json_f32_path(void);
/* posenc_json_f32 with a named writer ("scalar", "avx512"), for tests and benchmarks;
 * POSENC_ENOISA where this CPU cannot run it. Same text from every writer. */
POSENC_API int64_t posenc_json_f32_by(const char *path, const float *values, const int64_t *shape, int ndim,
                                      char *out, int64_t capacity);

#ifdef __cplusplus
}
#endif

#endif /* POSENC_H */
