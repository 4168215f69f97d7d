/* posenc.native._posenc: the CPython binding of libposenc's kernels, for calls of any size.
 *
 * Why a binding next to the ctypes one (posenc/native/library.py): a ctypes call costs 5-10 us
 * to pull pointers out of numpy arrays, more than computing a few rows, so small jobs ran on
 * numba, and numba costs a serving process about a second to import and load (docs/startup.md).
 * Here a call takes its arrays through the buffer protocol (no numpy headers, any numpy) for
 * well under a microsecond, so every job runs the native kernels and a process that only
 * computes, serves or reads tables never imports numba.
 *
 * Each function has the signature of the numba kernel it stands for (posenc/kernels/, the
 * portable fallback and the oracle the tests hold this binding to): arrays in, rows lo..hi
 * computed, nothing returned, bit for bit the same values. Arguments are what the API layer
 * built; the checks here are the cheap ones that keep a wrong call from reading or writing
 * outside its arrays (TypeError / ValueError), never user-facing validation. Jobs of
 * RELEASE_GIL_ELEMENTS or more run without the GIL, so posenc.kernels.parallel.run_rows splits
 * them across threads as it does the numba kernels.
 *
 * Also here: the seqlock reads and writes of the shm registry and the segment state word
 * (posenc/shm/registry.py, segment.py), with the C readers' own slot reader (posenc_shm.h).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "posenc.h"
#include "posenc_crmath.h"
#include "posenc_shm.h"

/* Below this many output elements a call keeps the GIL: releasing and taking it back costs
 * about as much as computing a thousand values. */
#define RELEASE_GIL_ELEMENTS 16384

/* ---- arguments -------------------------------------------------------------------------- */

enum { ANY = 0, F32 = 1, F64 = 2, I64 = 4, U64 = 8, U32 = 16, BOOL = 32 };

static const char *kind_name(int kinds)
{
    switch (kinds) {
    case F32 | F64: return "float32 or float64";
    case F64: return "float64";
    case I64: return "int64";
    case U64: return "uint64";
    case U32: return "uint32";
    case BOOL: return "bool";
    default: return "numeric";
    }
}

/* The element kind of a buffer format ("d", "<d", "=l", ...), 0 if none of ours. Only the
 * native byte order: "<" is native on the little-endian CPUs posenc builds for. */
static int kind_of(const char *format, Py_ssize_t itemsize)
{
    if (!format) return 0;
    if (*format == '@' || *format == '=' || *format == '<') format++;
    if (!format[0] || format[1]) return 0;
    switch (format[0]) {
    case 'f': return itemsize == 4 ? F32 : 0;
    case 'd': return itemsize == 8 ? F64 : 0;
    case 'l': case 'q': return itemsize == 8 ? I64 : 0;
    case 'L': case 'Q': return itemsize == 8 ? U64 : 0;
    case 'I': return itemsize == 4 ? U32 : 0;
    case '?': return itemsize == 1 ? BOOL : 0;
    default: return 0;
    }
}

/* A borrowed array: its buffer (released by release_all), element kind and shape. */
typedef struct {
    Py_buffer view;
    int held;
    int kind;
} array_arg;

/* Take `obj` as a C-contiguous array of `ndim` dimensions (-1: any) whose elements are one of
 * `kinds` (ANY: any element type, the format not asked for, so numpy's bfloat16 passes too). */
static int take(array_arg *a, PyObject *obj, const char *name, int ndim, int kinds, int writable)
{
    int flags = PyBUF_C_CONTIGUOUS | (kinds == ANY ? 0 : PyBUF_FORMAT) | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, &a->view, flags) != 0) {
        PyErr_Format(PyExc_ValueError, "%s: must be a C-contiguous%s array", name, writable ? " writable" : "");
        return -1;
    }
    a->held = 1;
    a->kind = kinds == ANY ? ANY : kind_of(a->view.format, a->view.itemsize);
    if (kinds != ANY && !(a->kind & kinds)) {
        PyErr_Format(PyExc_TypeError, "%s: must be %s, got format '%s'", name, kind_name(kinds),
                     a->view.format ? a->view.format : "?");
        return -1;
    }
    if (ndim >= 0 && a->view.ndim != ndim) {
        PyErr_Format(PyExc_ValueError, "%s: must have %d dimensions, got %d", name, ndim, a->view.ndim);
        return -1;
    }
    return 0;
}

static void release_all(array_arg *arrays, int n)
{
    for (int i = 0; i < n; i++)
        if (arrays[i].held) PyBuffer_Release(&arrays[i].view);
}

static Py_ssize_t extent(const array_arg *a, int axis) { return a->view.shape[axis]; }
static Py_ssize_t count(const array_arg *a) { return a->view.len / a->view.itemsize; }

static int int_arg(PyObject *obj, const char *name, int64_t *out)
{
    long long v = PyLong_AsLongLong(obj);
    if (v == -1 && PyErr_Occurred()) {
        PyErr_Format(PyExc_TypeError, "%s: must be an integer", name);
        return -1;
    }
    *out = (int64_t)v;
    return 0;
}

static int bool_arg(PyObject *obj, const char *name, int *out)
{
    int v = PyObject_IsTrue(obj);
    if (v < 0) {
        PyErr_Format(PyExc_TypeError, "%s: must be a truth value", name);
        return -1;
    }
    *out = v;
    return 0;
}

static int nargs_is(Py_ssize_t nargs, Py_ssize_t want, const char *function)
{
    if (nargs == want) return 0;
    PyErr_Format(PyExc_TypeError, "%s() takes %zd arguments (%zd given)", function, want, nargs);
    return -1;
}

/* 0 <= lo <= hi <= n, else ValueError. */
static int row_range(int64_t lo, int64_t hi, int64_t n)
{
    if (0 <= lo && lo <= hi && hi <= n) return 0;
    PyErr_Format(PyExc_ValueError, "rows %lld..%lld: outside 0..%lld", (long long)lo, (long long)hi, (long long)n);
    return -1;
}

static int require(int ok, const char *message)
{
    if (ok) return 0;
    PyErr_SetString(PyExc_ValueError, message);
    return -1;
}

static PyObject *kernel_result(int rc, const char *kernel)
{
    if (rc == POSENC_OK) Py_RETURN_NONE;
    if (rc == POSENC_ENOMEM) return PyErr_Format(PyExc_MemoryError, "posenc native %s: out of memory for scratch", kernel);
    return PyErr_Format(PyExc_RuntimeError, "posenc native %s: failed with code %d", kernel, rc);
}

#define RUN(elements, call)                                                                                   \
    do {                                                                                                      \
        if ((elements) >= RELEASE_GIL_ELEMENTS) {                                                             \
            Py_BEGIN_ALLOW_THREADS rc = (call);                                                               \
            Py_END_ALLOW_THREADS                                                                              \
        } else {                                                                                              \
            rc = (call);                                                                                      \
        }                                                                                                     \
    } while (0)

/* The layout checks of sincos_rows and sincos_plan_rows (0, or -1 with a ValueError): n_cos within
 * the frequencies, no negative stride or base. */
static int check_layout(int64_t n_sin, int64_t n_cos, int64_t row_stride, int64_t sin_base, int64_t cos_base)
{
    return require(0 <= n_cos && n_cos <= n_sin && row_stride >= 0 && sin_base >= 0 && cos_base >= 0,
                   "layout: n_cos must be 0..len(freqs), strides and bases >= 0");
}

/* That `rows` (>= 1) rows from a flat array's start, laid out as posenc.h lays them, end inside
 * its `flat_count` elements: the last element the last row writes, computed without overflow. */
static int check_rows_fit(int64_t n_sin, int64_t n_cos, int64_t row_stride, int64_t sin_base, int64_t cos_base,
                          int interleaved, int64_t rows, int64_t flat_count)
{
    int64_t last = interleaved ? (n_cos < n_sin ? 2 * n_sin - 2 : 2 * n_sin - 1)
                               : (sin_base + n_sin - 1 > cos_base + n_cos - 1 ? sin_base + n_sin - 1
                                                                               : cos_base + n_cos - 1);
    int64_t end;
    return require(!__builtin_mul_overflow(rows - 1, row_stride, &end) && !__builtin_add_overflow(end, last, &end)
                       && end < flat_count, "flat: too small for the rows and layout");
}

/* ---- the kernels of libposenc (the active path) ----------------------------------------- */

/* sincos_rows(positions, freqs, amp, flat, row_stride, sin_base, cos_base, interleaved, n_cos, lo, hi):
 * kernels/trig.py's signature; posenc.h posenc_sincos_rows_fn for the layout. */
static PyObject *sincos_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    array_arg a[4] = {0};
    int64_t row_stride, sin_base, cos_base, n_cos, lo, hi;
    int interleaved, rc = 0;
    PyObject *result = NULL;
    if (nargs_is(nargs, 11, "sincos_rows") || take(&a[0], args[0], "positions", 1, F64, 0)
        || take(&a[1], args[1], "freqs", 1, F64, 0) || take(&a[2], args[2], "amp", 1, F64, 0)
        || take(&a[3], args[3], "flat", 1, F32 | F64, 1) || int_arg(args[4], "row_stride", &row_stride)
        || int_arg(args[5], "sin_base", &sin_base) || int_arg(args[6], "cos_base", &cos_base)
        || bool_arg(args[7], "interleaved", &interleaved) || int_arg(args[8], "n_cos", &n_cos)
        || int_arg(args[9], "lo", &lo) || int_arg(args[10], "hi", &hi))
        goto done;
    int64_t n_sin = count(&a[1]);
    if (require(count(&a[2]) == n_sin, "amp: must have one entry per frequency")
        || check_layout(n_sin, n_cos, row_stride, sin_base, cos_base) || row_range(lo, hi, count(&a[0])))
        goto done;
    if (hi == lo || n_sin == 0) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    if (check_rows_fit(n_sin, n_cos, row_stride, sin_base, cos_base, interleaved, hi, count(&a[3])))
        goto done;
    posenc_layout layout = {row_stride, sin_base, cos_base, n_cos, interleaved, 0};
    int dtype = a[3].kind == F32 ? POSENC_F32 : POSENC_F64;
    char *out = (char *)a[3].view.buf + a[3].view.itemsize * lo * row_stride;
    const double *positions = (const double *)a[0].view.buf + lo;
    RUN((hi - lo) * (n_sin + n_cos),
        posenc_sincos_rows(positions, hi - lo, a[1].view.buf, a[2].view.buf, n_sin, &layout, out, dtype));
    result = kernel_result(rc, "sincos_rows");
done:
    release_all(a, 4);
    return result;
}

/* ---- plans: one spec's sincos with its part caches kept between calls (posenc.h) --------- */

#define PLAN_CAPSULE "posenc.sincos_plan"

typedef struct {
    posenc_sincos_plan *plan;
    int64_t n_sin; /* to check a layout's rows against the output before the kernel writes them */
} plan_handle;

static void plan_capsule_free(PyObject *capsule)
{
    plan_handle *h = PyCapsule_GetPointer(capsule, PLAN_CAPSULE);
    if (h) {
        posenc_sincos_plan_free(h->plan);
        PyMem_Free(h);
    }
}

/* sincos_plan(freqs, amp) -> a capsule holding posenc_sincos_plan of these frequencies. */
static PyObject *sincos_plan(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    array_arg a[2] = {0};
    PyObject *result = NULL;
    if (nargs_is(nargs, 2, "sincos_plan") || take(&a[0], args[0], "freqs", 1, F64, 0)
        || take(&a[1], args[1], "amp", 1, F64, 0)
        || require(count(&a[0]) >= 1 && count(&a[1]) == count(&a[0]),
                   "amp: must have one entry per frequency, and there must be one"))
        goto done;
    plan_handle *h = PyMem_Malloc(sizeof *h);
    if (h)
        *h = (plan_handle){posenc_sincos_plan_new(a[0].view.buf, a[1].view.buf, count(&a[0])), count(&a[0])};
    if (!h || !h->plan) {
        PyMem_Free(h);
        PyErr_SetString(PyExc_MemoryError, "posenc native sincos_plan: out of memory");
        goto done;
    }
    result = PyCapsule_New(h, PLAN_CAPSULE, plan_capsule_free);
    if (!result) {
        posenc_sincos_plan_free(h->plan);
        PyMem_Free(h);
    }
done:
    release_all(a, 2);
    return result;
}

/* sincos_plan_rows(plan, positions, flat, row_stride, sin_base, cos_base, interleaved, n_cos): every
 * position's row into flat (sincos_rows' layout rules). Holds the GIL throughout: a plan's caches are
 * one caller's at a time, and plans serve requests of a few rows (posenc.api._tables.PlannedRows). */
static PyObject *sincos_plan_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    array_arg a[2] = {0};
    int64_t row_stride, sin_base, cos_base, n_cos;
    int interleaved;
    PyObject *result = NULL;
    plan_handle *h = nargs == 8 ? PyCapsule_GetPointer(args[0], PLAN_CAPSULE) : NULL;
    if (nargs_is(nargs, 8, "sincos_plan_rows") || !h || take(&a[0], args[1], "positions", 1, F64, 0)
        || take(&a[1], args[2], "flat", 1, F32 | F64, 1) || int_arg(args[3], "row_stride", &row_stride)
        || int_arg(args[4], "sin_base", &sin_base) || int_arg(args[5], "cos_base", &cos_base)
        || bool_arg(args[6], "interleaved", &interleaved) || int_arg(args[7], "n_cos", &n_cos))
        goto done;
    int64_t n = count(&a[0]), n_sin = h->n_sin;
    if (check_layout(n_sin, n_cos, row_stride, sin_base, cos_base)
        || (n && check_rows_fit(n_sin, n_cos, row_stride, sin_base, cos_base, interleaved, n, count(&a[1]))))
        goto done;
    posenc_layout layout = {row_stride, sin_base, cos_base, n_cos, interleaved, 0};
    int dtype = a[1].kind == F32 ? POSENC_F32 : POSENC_F64;
    result = kernel_result(posenc_sincos_plan_rows(h->plan, a[0].view.buf, n, &layout, a[1].view.buf, dtype),
                           "sincos_plan_rows");
done:
    release_all(a, 2);
    return result;
}

/* rope_rotate_rows(x, cos, sin, interleaved, out, lo, hi): kernels/rope.py's signature. */
static PyObject *rope_rotate_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    array_arg a[4] = {0};
    int64_t lo, hi;
    int interleaved, rc = 0;
    PyObject *result = NULL;
    if (nargs_is(nargs, 7, "rope_rotate_rows") || take(&a[0], args[0], "x", 3, F32 | F64, 0)
        || take(&a[1], args[1], "cos", 2, F64, 0) || take(&a[2], args[2], "sin", 2, F64, 0)
        || bool_arg(args[3], "interleaved", &interleaved) || take(&a[3], args[4], "out", 3, F32 | F64, 1)
        || int_arg(args[5], "lo", &lo) || int_arg(args[6], "hi", &hi))
        goto done;
    int64_t batch = extent(&a[0], 0), n = extent(&a[0], 1), width = extent(&a[0], 2), n_freq = extent(&a[1], 1);
    if (require(a[3].kind == a[0].kind && extent(&a[3], 0) == batch && extent(&a[3], 1) == n
                    && extent(&a[3], 2) == width, "out: must match x")
        || require(extent(&a[1], 0) == n && extent(&a[2], 0) == n && extent(&a[2], 1) == n_freq
                       && 2 * n_freq <= width, "cos, sin: must be [n, n_freq] with 2*n_freq <= head_dim")
        || row_range(lo, hi, n))
        goto done;
    if (hi == lo) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    int dtype = a[0].kind == F32 ? POSENC_F32 : POSENC_F64;
    Py_ssize_t offset = a[0].view.itemsize * lo * width;
    RUN(batch * (hi - lo) * width,
        posenc_rope_rotate((const char *)a[0].view.buf + offset, (char *)a[3].view.buf + offset, batch, n * width,
                           hi - lo, width, (const double *)a[1].view.buf + lo * n_freq,
                           (const double *)a[2].view.buf + lo * n_freq, n_freq, interleaved, dtype));
    result = kernel_result(rc, "rope_rotate");
done:
    release_all(a, 4);
    return result;
}

/* alibi_bias_rows(slopes, q_pos, k_pos, mode, out, lo, hi): kernels/alibi.py's signature. */
static PyObject *alibi_bias_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    array_arg a[4] = {0};
    int64_t mode, lo, hi;
    int rc = 0;
    PyObject *result = NULL;
    if (nargs_is(nargs, 7, "alibi_bias_rows") || take(&a[0], args[0], "slopes", 1, F64, 0)
        || take(&a[1], args[1], "q_pos", 1, F64, 0) || take(&a[2], args[2], "k_pos", 1, F64, 0)
        || int_arg(args[3], "mode", &mode) || take(&a[3], args[4], "out", 3, F32 | F64, 1)
        || int_arg(args[5], "lo", &lo) || int_arg(args[6], "hi", &hi))
        goto done;
    int64_t n_heads = extent(&a[3], 0), q_len = extent(&a[3], 1), k_len = extent(&a[3], 2);
    if (require(count(&a[0]) == n_heads && count(&a[1]) == q_len && count(&a[2]) == k_len,
                "out: must be [heads, q, k] matching slopes and positions")
        || require(mode == POSENC_ALIBI_CAUSAL || mode == POSENC_ALIBI_SYMMETRIC || mode == POSENC_ALIBI_BLOOM,
                   "mode: must be 0, 1 or 2")
        || row_range(lo, hi, q_len))
        goto done;
    if (hi == lo || n_heads == 0 || k_len == 0) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    int dtype = a[3].kind == F32 ? POSENC_F32 : POSENC_F64;
    RUN(n_heads * (hi - lo) * k_len,
        posenc_alibi_bias(a[0].view.buf, n_heads, (const double *)a[1].view.buf + lo, hi - lo, a[2].view.buf, k_len,
                          (int)mode, (char *)a[3].view.buf + a[3].view.itemsize * lo * k_len, q_len * k_len, dtype));
    result = kernel_result(rc, "alibi_bias");
done:
    release_all(a, 4);
    return result;
}

/* gather_rows(table, rows, out, lo, hi): kernels/gather.py's signature; rows outside the table
 * raise IndexError with nothing written (the numba kernel trusts its caller to have checked). */
static PyObject *gather_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    array_arg a[3] = {0};
    int64_t lo, hi, bad = -1;
    int rc = 0;
    PyObject *result = NULL;
    if (nargs_is(nargs, 5, "gather_rows") || take(&a[0], args[0], "table", 2, ANY, 0)
        || take(&a[1], args[1], "rows", 1, I64, 0) || take(&a[2], args[2], "out", 2, ANY, 1)
        || int_arg(args[3], "lo", &lo) || int_arg(args[4], "hi", &hi))
        goto done;
    int64_t row_bytes = extent(&a[0], 1) * a[0].view.itemsize;
    if (require(a[2].view.itemsize == a[0].view.itemsize && extent(&a[2], 1) == extent(&a[0], 1),
                "out: must be [n, width] of the table's element type")
        || row_range(lo, hi, count(&a[1]) < extent(&a[2], 0) ? count(&a[1]) : extent(&a[2], 0)))
        goto done;
    if (hi == lo || row_bytes == 0) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    RUN((hi - lo) * extent(&a[0], 1),
        posenc_gather_rows(a[0].view.buf, extent(&a[0], 0), row_bytes, (const int64_t *)a[1].view.buf + lo, hi - lo,
                           (char *)a[2].view.buf + row_bytes * lo, &bad));
    if (rc == POSENC_ERANGE)
        PyErr_Format(PyExc_IndexError, "rows: index %lld is outside the table (0..%lld)",
                     (long long)((const int64_t *)a[1].view.buf)[lo + bad], (long long)extent(&a[0], 0) - 1);
    else
        result = kernel_result(rc, "gather_rows");
done:
    release_all(a, 3);
    return result;
}

/* ---- small kernels that are not in libposenc's tables (integer or pow/log work) ---------- */

/* index_span(values) -> (least, greatest) of a non-empty int64 array, in one pass. */
static PyObject *index_span(PyObject *self, PyObject *values)
{
    (void)self;
    array_arg a = {0};
    PyObject *result = NULL;
    if (take(&a, values, "values", 1, I64, 0) || require(count(&a) > 0, "values: must not be empty")) goto done;
    const int64_t *v = a.view.buf;
    int64_t lo = v[0], hi = v[0];
    for (Py_ssize_t k = 1, n = count(&a); k < n; k++) {
        lo = v[k] < lo ? v[k] : lo;
        hi = v[k] > hi ? v[k] : hi;
    }
    result = Py_BuildValue("(LL)", (long long)lo, (long long)hi);
done:
    release_all(&a, 1);
    return result;
}

/* Whether one float32 (as its bits) lies exactly halfway between two neighbours of the 16-bit
 * grid with `mant` mantissa bits and least exponent `emin`: kernels/halves.py, which says why. */
static int half_midpoint(uint32_t b, int64_t mant, int64_t emin)
{
    uint32_t field = (b >> 23) & 0xFF;
    if (field == 0xFF) return 0;
    int64_t significand = b & 0x7FFFFF, exponent = -126;
    if (field) {
        significand |= 0x800000;
        exponent = (int64_t)field - 127;
    }
    int64_t sh = 23 + (exponent > emin ? exponent : emin) - exponent - mant;
    return 1 <= sh && sh <= 24 && (significand & ((INT64_C(1) << sh) - 1)) == INT64_C(1) << (sh - 1);
}

/* half_midpoint_rows(bits, mant, emin, out) -> rows with a midpoint: kernels/halves.py's signature. */
static PyObject *half_midpoint_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    array_arg a[2] = {0};
    int64_t mant, emin, hits = 0;
    PyObject *result = NULL;
    if (nargs_is(nargs, 4, "half_midpoint_rows") || take(&a[0], args[0], "bits", 2, U32, 0)
        || int_arg(args[1], "mant", &mant) || int_arg(args[2], "emin", &emin)
        || take(&a[1], args[3], "out", 1, BOOL, 1)
        || require(count(&a[1]) >= extent(&a[0], 0), "out: must have one entry per row")
        || require(0 <= mant && mant <= 23 && -126 <= emin && emin <= 127, "mant, emin: not a 16-bit float grid"))
        goto done;
    const uint32_t *bits = a[0].view.buf;
    uint8_t *out = a[1].view.buf;
    int64_t rows = extent(&a[0], 0), width = extent(&a[0], 1);
    for (int64_t r = 0; r < rows; r++) {
        int hit = 0;
        for (int64_t j = 0; j < width && !hit; j++) hit = half_midpoint(bits[r * width + j], mant, emin);
        out[r] = (uint8_t)hit;
        hits += hit;
    }
    result = PyLong_FromLongLong(hits);
done:
    release_all(a, 2);
    return result;
}

/* t5_buckets(rel, bidirectional, num_buckets, max_distance, out, lo, hi): kernels/t5.py's signature
 * and arithmetic (the log in float32, as the reference), operation for operation. */
static PyObject *t5_buckets(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    array_arg a[2] = {0};
    int64_t num_buckets, max_distance, lo, hi;
    int bidirectional;
    PyObject *result = NULL;
    if (nargs_is(nargs, 7, "t5_buckets") || take(&a[0], args[0], "rel", 1, I64, 0)
        || bool_arg(args[1], "bidirectional", &bidirectional) || int_arg(args[2], "num_buckets", &num_buckets)
        || int_arg(args[3], "max_distance", &max_distance) || take(&a[1], args[4], "out", 1, I64, 1)
        || int_arg(args[5], "lo", &lo) || int_arg(args[6], "hi", &hi)
        || row_range(lo, hi, count(&a[0]) < count(&a[1]) ? count(&a[0]) : count(&a[1])))
        goto done;
    int64_t n = bidirectional ? num_buckets / 2 : num_buckets;
    int64_t max_exact = n / 2;
    if (require(max_exact >= 1 && max_distance > max_exact, "num_buckets, max_distance: need max_distance > buckets/4"))
        goto done;
    /* T5's float32 logs, correctly rounded (posenc_crmath.h), as kernels/t5.py */
    const float denom = (float)posenc_cr_log((double)max_distance / (double)max_exact);
    const float span = (float)(n - max_exact);
    const int64_t *rel = a[0].view.buf;
    int64_t *out = a[1].view.buf;
    for (int64_t k = lo; k < hi; k++) {
        int64_t r = rel[k], bucket = 0;
        if (bidirectional) {
            if (r > 0) bucket = n;
            r = r < 0 ? (int64_t)(0 - (uint64_t)r) : r; /* wraps as numba's abs does: INT64_MIN stays itself */
        } else {
            r = r < 0 ? (int64_t)(0 - (uint64_t)r) : 0;
        }
        if (r < max_exact) {
            out[k] = bucket + r;
        } else {
            float scaled = posenc_cr_logf((float)r / (float)max_exact) / denom * span;
            int64_t step = max_exact + (int64_t)scaled;
            out[k] = bucket + (step < n - 1 ? step : n - 1);
        }
    }
    result = Py_NewRef(Py_None);
done:
    release_all(a, 2);
    return result;
}

/* Rows lo..hi of the xPos decay, out[r, i] = zeta[i]^power[r] correctly rounded: a kernel call for RUN.
 * Each column's log once (zeta in (0, 1)), then exp(power log zeta) per element; posenc_cr_pow where
 * the fast path cannot prove its rounding or the power is not finite. */
static int xpos_rows(const double *zeta, int64_t width, const double *power, double *out, int64_t lo, int64_t hi)
{
    double *logs = malloc((size_t)(width > 0 ? width : 1) * 2 * sizeof(double));
    if (!logs) return POSENC_ENOMEM;
    for (int64_t i = 0; i < width; i++) pcr_log_dd(zeta[i], &logs[2 * i], &logs[2 * i + 1]);
    for (int64_t r = lo; r < hi; r++) {
        double y = power[r];
        for (int64_t i = 0; i < width; i++) {
            double *v = &out[r * width + i];
            if (!isfinite(y) || !pcr_pow_from_log(logs[2 * i], logs[2 * i + 1], y, 53, v)) *v = posenc_cr_pow(zeta[i], y);
        }
    }
    free(logs);
    return POSENC_OK;
}

/* xpos_decay_rows(zeta, power, out, lo, hi): out[r, i] = zeta[i]^power[r] correctly rounded
 * (posenc_crmath.h), as kernels/rope.py: libm's pow differs between CPUs, numpy's ** between ISAs. */
static PyObject *xpos_decay_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    array_arg a[3] = {0};
    int64_t lo, hi;
    int rc = 0;
    PyObject *result = NULL;
    if (nargs_is(nargs, 5, "xpos_decay_rows") || take(&a[0], args[0], "zeta", 1, F64, 0)
        || take(&a[1], args[1], "power", 1, F64, 0) || take(&a[2], args[2], "out", 2, F64, 1)
        || int_arg(args[3], "lo", &lo) || int_arg(args[4], "hi", &hi)
        || require(extent(&a[2], 1) == count(&a[0]), "out: must be [n, len(zeta)]")
        || row_range(lo, hi, count(&a[1]) < extent(&a[2], 0) ? count(&a[1]) : extent(&a[2], 0)))
        goto done;
    int64_t width = count(&a[0]);
    RUN((hi - lo) * width, xpos_rows(a[0].view.buf, width, a[1].view.buf, a[2].view.buf, lo, hi));
    result = kernel_result(rc, "xpos_decay");
done:
    release_all(a, 3);
    return result;
}

/* cr_pow_each(base, exponents, out): out[i] = base ** exponents[i]; cr_exp_each(x, out): out[i] = exp(x[i]);
 * correctly rounded (posenc_crmath.h): posenc.crmath.pow_each / exp_each on this binding. */
static PyObject *cr_pow_each(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    array_arg a[2] = {0};
    PyObject *result = NULL;
    double base;
    if (nargs_is(nargs, 3, "cr_pow_each")) return NULL;
    base = PyFloat_AsDouble(args[0]);
    if ((base == -1.0 && PyErr_Occurred()) || take(&a[0], args[1], "exponents", 1, F64, 0)
        || take(&a[1], args[2], "out", 1, F64, 1) || require(count(&a[0]) == count(&a[1]), "out: one per exponent"))
        goto done;
    const double *e = a[0].view.buf;
    double *out = a[1].view.buf;
    for (int64_t i = 0; i < count(&a[0]); i++) out[i] = posenc_cr_pow(base, e[i]);
    result = Py_NewRef(Py_None);
done:
    release_all(a, 2);
    return result;
}

static PyObject *cr_exp_each(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    array_arg a[2] = {0};
    PyObject *result = NULL;
    if (nargs_is(nargs, 2, "cr_exp_each") || take(&a[0], args[0], "x", 1, F64, 0) || take(&a[1], args[1], "out", 1, F64, 1)
        || require(count(&a[0]) == count(&a[1]), "out: one per x"))
        goto done;
    const double *x = a[0].view.buf;
    double *out = a[1].view.buf;
    for (int64_t i = 0; i < count(&a[0]); i++) out[i] = posenc_cr_exp(x[i]);
    result = Py_NewRef(Py_None);
done:
    release_all(a, 2);
    return result;
}

/* ---- shm registry slots and segment state (posenc_shm.h's layout) ---------------------- */

#define SLOT_WORDS (POSENC_SHM_REGISTRY_SLOT / 8)
#define HEADER_WORDS (POSENC_SHM_REGISTRY_HEADER / 8)
#define NAME_WORDS (POSENC_SHM_NAME_MAX / 8)
#define REGISTRY_WORDS (POSENC_SHM_REGISTRY_SIZE / 8)

static int take_registry(array_arg *a, PyObject *obj, int writable)
{
    if (take(a, obj, "words", 1, U64, writable)) return -1;
    return require(count(a) >= REGISTRY_WORDS, "words: smaller than a registry");
}

/* registry_find(words, name_words) -> (slot, generation): the first live slot naming it; slot -1
 * when none does, -2 when a slot stayed busy (a writer mid-update: the caller retries). */
static PyObject *registry_find(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    array_arg a[2] = {0};
    PyObject *result = NULL;
    if (nargs_is(nargs, 2, "registry_find") || take_registry(&a[0], args[0], 0)
        || take(&a[1], args[1], "name_words", 1, U64, 0) || require(count(&a[1]) == NAME_WORDS, "name_words: need 8"))
        goto done;
    const uint8_t *base = (const uint8_t *)a[0].view.buf + POSENC_SHM_REGISTRY_HEADER;
    const uint64_t *want = a[1].view.buf;
    long long found = -1;
    uint64_t generation = 0, name[NAME_WORDS];
    for (unsigned slot = 0; slot < POSENC_SHM_REGISTRY_CAPACITY && found == -1; slot++) {
        if (posenc_shm__read_slot(base + (size_t)slot * POSENC_SHM_REGISTRY_SLOT, &generation, name) != 0)
            found = -2;
        else if (generation != 0 && memcmp(name, want, sizeof name) == 0)
            found = slot;
    }
    result = Py_BuildValue("(LK)", found, (unsigned long long)(found >= 0 ? generation : 0));
done:
    release_all(a, 2);
    return result;
}

/* registry_snapshot(words, out) -> bool: every slot's [generation, name words] into
 * out[capacity, 9]; False when a slot stayed busy. */
static PyObject *registry_snapshot(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    array_arg a[2] = {0};
    PyObject *result = NULL;
    if (nargs_is(nargs, 2, "registry_snapshot") || take_registry(&a[0], args[0], 0)
        || take(&a[1], args[1], "out", 2, U64, 1)
        || require(extent(&a[1], 0) == POSENC_SHM_REGISTRY_CAPACITY && extent(&a[1], 1) == 1 + NAME_WORDS,
                   "out: must be [capacity, 9]"))
        goto done;
    const uint8_t *base = (const uint8_t *)a[0].view.buf + POSENC_SHM_REGISTRY_HEADER;
    uint64_t *out = a[1].view.buf;
    int ok = 1;
    for (unsigned slot = 0; slot < POSENC_SHM_REGISTRY_CAPACITY && ok; slot++) {
        uint64_t *entry = out + slot * (1 + NAME_WORDS);
        ok = posenc_shm__read_slot(base + (size_t)slot * POSENC_SHM_REGISTRY_SLOT, &entry[0], &entry[1]) == 0;
    }
    result = PyBool_FromLong(ok);
done:
    release_all(a, 2);
    return result;
}

/* registry_write_slot(words, slot, generation, name_words): the seqlock write (the caller holds
 * the registry's flock): counter odd, fields, counter even. An odd counter left by a writer that
 * died mid-update stays odd here, then even after. */
static PyObject *registry_write_slot(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    array_arg a[2] = {0};
    int64_t slot, generation;
    PyObject *result = NULL;
    if (nargs_is(nargs, 4, "registry_write_slot") || take_registry(&a[0], args[0], 1)
        || int_arg(args[1], "slot", &slot) || int_arg(args[2], "generation", &generation)
        || take(&a[1], args[3], "name_words", 1, U64, 0)
        || require(count(&a[1]) == NAME_WORDS, "name_words: need 8")
        || require(0 <= slot && slot < POSENC_SHM_REGISTRY_CAPACITY, "slot: outside the registry"))
        goto done;
    uint64_t *w = (uint64_t *)a[0].view.buf + HEADER_WORDS + slot * SLOT_WORDS;
    const uint64_t *name = a[1].view.buf;
    uint64_t counter = __atomic_load_n(&w[0], __ATOMIC_RELAXED) | 1u;
    __atomic_store_n(&w[0], counter, __ATOMIC_RELEASE);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&w[1], (uint64_t)generation, __ATOMIC_RELAXED);
    for (int k = 0; k < NAME_WORDS; k++) __atomic_store_n(&w[2 + k], name[k], __ATOMIC_RELAXED);
    __atomic_store_n(&w[0], counter + 1, __ATOMIC_RELEASE);
    result = Py_NewRef(Py_None);
done:
    release_all(a, 2);
    return result;
}

/* The state word of a segment header (format.py STATE_WORD: uint32 word 3). */
#define STATE_WORD 3

/* segment_store_state(words, state): a release store, so the data is visible before READY. */
static PyObject *segment_store_state(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    array_arg a = {0};
    int64_t state;
    PyObject *result = NULL;
    if (nargs_is(nargs, 2, "segment_store_state") || take(&a, args[0], "words", 1, U32, 1)
        || int_arg(args[1], "state", &state) || require(count(&a) > STATE_WORD, "words: shorter than a header"))
        goto done;
    __atomic_store_n((uint32_t *)a.view.buf + STATE_WORD, (uint32_t)state, __ATOMIC_RELEASE);
    result = Py_NewRef(Py_None);
done:
    release_all(&a, 1);
    return result;
}

/* segment_load_state(words) -> state, with an acquire load: reads of the data come after it. */
static PyObject *segment_load_state(PyObject *self, PyObject *words)
{
    (void)self;
    array_arg a = {0};
    PyObject *result = NULL;
    if (take(&a, words, "words", 1, U32, 0) || require(count(&a) > STATE_WORD, "words: shorter than a header"))
        goto done;
    result = PyLong_FromUnsignedLong(__atomic_load_n((const uint32_t *)a.view.buf + STATE_WORD, __ATOMIC_ACQUIRE));
done:
    release_all(&a, 1);
    return result;
}

/* ---- the module ----------------------------------------------------------------------- */

#define FAST(name, doc) {#name, (PyCFunction)(void (*)(void))name, METH_FASTCALL, doc}

static PyMethodDef methods[] = {
    FAST(sincos_rows, "sincos_rows(positions, freqs, amp, flat, row_stride, sin_base, cos_base, interleaved, "
                      "n_cos, lo, hi): amp*sin/cos rows lo..hi into flat (kernels/trig.py)"),
    FAST(sincos_plan, "sincos_plan(freqs, amp) -> a plan of these frequencies (posenc_sincos_plan)"),
    FAST(sincos_plan_rows, "sincos_plan_rows(plan, positions, flat, row_stride, sin_base, cos_base, interleaved, "
                           "n_cos): every position's row into flat, the plan's part caches kept"),
    FAST(rope_rotate_rows, "rope_rotate_rows(x, cos, sin, interleaved, out, lo, hi) (kernels/rope.py)"),
    FAST(alibi_bias_rows, "alibi_bias_rows(slopes, q_pos, k_pos, mode, out, lo, hi) (kernels/alibi.py)"),
    FAST(gather_rows, "gather_rows(table, rows, out, lo, hi): out[k] = table[rows[k]] (kernels/gather.py)"),
    {"index_span", index_span, METH_O, "index_span(values) -> (least, greatest) of a non-empty int64 array"},
    FAST(half_midpoint_rows, "half_midpoint_rows(bits, mant, emin, out) -> rows with a 16-bit midpoint"),
    FAST(t5_buckets, "t5_buckets(rel, bidirectional, num_buckets, max_distance, out, lo, hi) (kernels/t5.py)"),
    FAST(xpos_decay_rows, "xpos_decay_rows(zeta, power, out, lo, hi): out[r, i] = zeta[i] ** power[r] (correctly rounded)"),
    FAST(cr_pow_each, "cr_pow_each(base, exponents, out): out[i] = base ** exponents[i], correctly rounded"),
    FAST(cr_exp_each, "cr_exp_each(x, out): out[i] = exp(x[i]), correctly rounded"),
    FAST(registry_find, "registry_find(words, name_words) -> (slot, generation); slot -1 none, -2 busy"),
    FAST(registry_snapshot, "registry_snapshot(words, out) -> whether every slot was read"),
    FAST(registry_write_slot, "registry_write_slot(words, slot, generation, name_words): seqlock write"),
    FAST(segment_store_state, "segment_store_state(words, state): release store of a header's state"),
    {"segment_load_state", segment_load_state, METH_O, "segment_load_state(words) -> state (acquire load)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_posenc",
    "libposenc's kernels and the shm seqlocks for Python calls of any size (native/python/_posenc.c)", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__posenc(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m && (PyModule_AddIntConstant(m, "ABI_VERSION", POSENC_ABI_VERSION) < 0
              || PyModule_AddIntConstant(m, "RELEASE_GIL_ELEMENTS", RELEASE_GIL_ELEMENTS) < 0
              /* the shm layout this binding was built with, checked against posenc.shm's by the tests */
              || PyModule_AddIntConstant(m, "STATE_WORD", STATE_WORD) < 0
              || PyModule_AddIntConstant(m, "REGISTRY_CAPACITY", POSENC_SHM_REGISTRY_CAPACITY) < 0
              || PyModule_AddIntConstant(m, "REGISTRY_SIZE", POSENC_SHM_REGISTRY_SIZE) < 0
              || PyModule_AddIntConstant(m, "NAME_WORDS", NAME_WORDS) < 0)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
