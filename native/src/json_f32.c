/* posenc_json_f32: a C-contiguous float32 array as JSON text, byte for byte what orjson 3.13
 * prints for the same numpy array (posenc.http.codecs.json_data; docs/http.md, "Numbers in JSON").
 *
 * Each finite number is the shortest decimal that reads back as the same float32 (round to
 * nearest even), the one closest to the value among the shortest, in orjson's notation:
 *   digits d1..dn, value 0.d1..dn * 10^p
 *   0 < p <= 13, p >= n:  integer digits then ".0"        16777216.0, 123456790000.0
 *   0 < p <= 13, p < n:   a decimal point inside            0.5 -> p=0 below; 123.45
 *   -6 < p <= 0:          "0." then -p zeros then digits    0.1, 0.0000015
 *   otherwise:            d1[.d2..dn]e[+-]x, x = p - 1      1e+13, 1.2345679e-7, 1e-45
 * with a leading '-' for negative numbers (-0.0 included); NaN and +-inf are null.
 *
 * The digits come from one exact integer computation per number (Schubfach, R. Giulietti, "The
 * Schubfach way to render doubles", 2020, in its float32 form): the rounding interval of v, scaled
 * by 10^-k so that it is 1 to 10 units wide, is located with three 64x64->128-bit products rounded
 * to odd, which decide exactly which integers it contains. The shortest decimal is then the one
 * multiple of ten in the interval if there is one (fewer digits than any other point of it), else
 * the closer of the two integers around v that the interval holds (ties to the even one). Trailing
 * zeros are stripped while the digits are laid out. Every float32 bit pattern was checked against
 * orjson (native/tools/json_f32_exhaustive.py).
 *
 * This file is the scalar writer, the nesting of lists and the choice of writer; json_f32_avx512.c
 * is the AVX-512 writer (eight numbers per step, the same text). Layout is branch-light: 8 digits
 * at once from one 64-bit word, each number's text built in a 128-bit register and stored whole
 * (16 bytes that the next number overwrites), so the buffer carries JSON_F32_SLACK bytes past the
 * text. No AVX2 writer: the AVX-512 one leans on byte shuffles per 128-bit lane, 64-bit lane
 * multiplies and lzcnt, which AVX2 lacks or splits; the kernels' avx2 path prints with the scalar one. */
#include <stdint.h>
#include <string.h>

#include "json_f32.h"
#include "json_tables.h"
#include "posenc.h"

/* Longest number by construction, '-' included ("-0.00000" and 9 digits; the longest printed is 16,
 * over all 2^32), and the slack past the text for the 16-byte stores. */
#define JSON_F32_MAX_CHARS 17
#define JSON_F32_SLACK 48
/* Element counts (and so lists per level) above 2^55 are refused: the capacity then fits in 63 bits. */
#define JSON_F32_MAX_VALUES ((int64_t)1 << 55)

typedef unsigned __int128 u128;

/* x < 10^8 as 8 decimal digit values (0..9), the most significant in the lowest byte. */
static inline uint64_t digits8(uint32_t x)
{
    uint64_t v = x / 10000 | (uint64_t)(x % 10000) << 32;          /* two 4-digit halves */
    uint64_t q = (v * 10486 >> 20) & 0x0000007F0000007Full;        /* each half / 100 */
    v = q | (v - q * 100) << 16;                                    /* four 2-digit groups */
    q = (v * 103 >> 10) & 0x000F000F000F000Full;                    /* each group / 10 */
    return q | (v - q * 10) << 8;                                   /* eight digits */
}

/* The top 64 bits of g * cp rounded to odd below bit 31: 4 * scaled value with a sticky bit. */
static inline uint32_t round_odd(uint64_t g, uint64_t cp)
{
    uint64_t x = (uint64_t)(((unsigned __int128)g * cp) >> 64);
    return (uint32_t)(x >> 31) | ((uint32_t)x != 0);
}

/* The shortest decimal of a positive finite float32 (bits without the sign): *digits * 10^k. */
static inline uint32_t shortest(uint32_t bits, int *k_out)
{
    uint32_t biased = bits >> 23, c = bits & 0x7FFFFF;
    int irregular = c == 0 && biased > 1;
    if (biased) c |= 0x800000;
    const json_scale *scale = &posenc_json_scales[biased][irregular];
    uint64_t cb = (uint64_t)c << 2;
    uint32_t odd = c & 1;                   /* odd significand: the interval excludes its ends */
    uint32_t vb = round_odd(scale->g, cb << scale->h);
    uint32_t vl = round_odd(scale->g, (cb - 2 + irregular) << scale->h);
    uint32_t vr = round_odd(scale->g, (cb + 2) << scale->h);
    uint32_t s = vb >> 2;                   /* the integer part of the scaled value */
    uint32_t down10 = s / 10 * 10, up10 = down10 + 10;
    /* which candidates the interval holds (bitwise, not short-circuit: no data-dependent branch) */
    uint32_t down10_in = vl + odd <= down10 << 2, up10_in = (up10 << 2) + odd <= vr;
    uint32_t s_in = vl + odd <= s << 2, t_in = ((s + 1) << 2) + odd <= vr;
    int32_t above_mid = (int32_t)(vb - (4 * s + 2));        /* 4 * (scaled - (s + 1/2)) */
    uint32_t closer_t = (above_mid > 0) | ((above_mid == 0) & s);
    uint32_t nearest = s + ((s_in ^ 1) | (t_in & closer_t));
    uint32_t ten = down10_in ? down10 : up10;
    *k_out = scale->k;
    /* a multiple of ten in the interval is the only shortest one */
    return down10_in != up10_in ? ten : nearest;
}

/* 16 bytes (the low byte first) of which the first `n` (0..16) are set. */
static inline u128 bytes_below(int n)
{
    return n >= 16 ? ~(u128)0 : ((u128)1 << (8 * n)) - 1;
}

#define ASCII_ZEROS (((u128)0x3030303030303030ull << 64) | 0x3030303030303030ull)

/* The text of a positive finite float32 (bits without the sign) in 16 bytes, first character in
 * the low byte, and its length. Built in registers: a store of the pieces and a reload would stall
 * on store forwarding. Bytes past the length are don't-care. */
static inline u128 finite_text(uint32_t bits, int *length)
{
    int k;
    uint32_t d = shortest(bits, &k);
    uint32_t top = d / 100000000;           /* d has at most 9 digits */
    uint64_t low = digits8(d - top * 100000000);
    int lead = top ? 0 : 1 + (low ? __builtin_ctzll(low) >> 3 : 8);
    int trail = low ? __builtin_clzll(low) >> 3 : 8;
    int n = 9 - lead - trail;               /* significant digits */
    int point = 9 - lead + k;               /* value = 0.d1..dn * 10^point */
    u128 values = ((u128)low << 8 | top) >> (8 * lead);     /* digit values, zero past the n-th */
    u128 digits = values | (ASCII_ZEROS & bytes_below(n));  /* as ASCII */
    if (point > 0 && point <= 13) {
        if (point >= n) {                   /* integer: digits, zeros, ".0" */
            *length = point + 2;
            return (digits | ASCII_ZEROS) ^ ((u128)('0' ^ '.') << (8 * point));
        }
        u128 whole = bytes_below(point);    /* a point inside the digits */
        *length = n + 1;
        return (digits & whole) | (digits & ~whole) << 8 | (u128)'.' << (8 * point);
    }
    if (point <= 0 && point > -6) {         /* "0." and -point zeros before the digits */
        *length = 2 - point + n;
        return digits << (8 * (2 - point)) | (ASCII_ZEROS ^ (u128)('0' ^ '.') << 8);
    }
    u128 text = n > 1 ? (digits & 0xFF) | (digits >> 8) << 16 | '.' << 8 : digits;  /* scientific */
    int at = n > 1 ? n + 1 : 1, x = point - 1;
    uint32_t size = x < 0 ? (uint32_t)-x : (uint32_t)x;
    uint32_t exponent = size >= 10 ? ('0' + size / 10) | ('0' + size % 10) << 8 : '0' + size;
    *length = at + 2 + 1 + (size >= 10);
    return text | (u128)('e' | (x < 0 ? '-' : '+') << 8 | exponent << 16) << (8 * at);
}

/* One float32 as orjson prints it, at p; returns its end. */
static inline char *put_f32(char *p, uint32_t bits)
{
    if (posenc_json_is_special(bits)) return posenc_json_special(p, bits);
    *p = '-';
    p += bits >> 31;
    int length;
    u128 text = finite_text(bits & 0x7FFFFFFF, &length);
    memcpy(p, &text, 16);
    return p + length;
}

char *posenc_json_row_scalar(char *p, const uint32_t *bits, int64_t n)
{
    for (int64_t j = 0; j < n; j++) {
        p = put_f32(p, bits[j]);
        *p++ = ',';
    }
    return p;
}

/* ---- code paths ------------------------------------------------------------------------ */

static const struct {
    const char *name;
    json_row_fn row;
} json_paths[] = {
#if defined(__x86_64__)
    {"avx512", posenc_json_row_avx512},
#endif
    {"scalar", posenc_json_row_scalar},
};

static int cpu_runs_avx512_json(void)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")
           && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512cd")
           && __builtin_cpu_supports("avx512vl") && posenc_kernels_for("avx512") != NULL;
#else
    return 0;
#endif
}

static json_row_fn row_for(const char *name)
{
    if (!name) return NULL;
    for (size_t i = 0; i < sizeof json_paths / sizeof json_paths[0]; i++)
        if (strcmp(name, json_paths[i].name) == 0)
            return strcmp(name, "scalar") == 0 || cpu_runs_avx512_json() ? json_paths[i].row : NULL;
    return NULL;
}

/* The active kernel path's writer where there is one for it (AVX-512), else the scalar one. */
static const char *active_name(void)
{
    const char *isa = posenc_isa();
    return isa && strcmp(isa, "avx512") == 0 && cpu_runs_avx512_json() ? "avx512" : "scalar";
}

const char *posenc_json_f32_path(void) { return active_name(); }

int64_t posenc_json_f32_capacity(const int64_t *shape, int ndim)
{
    if (ndim < 0 || ndim > 64) return POSENC_EINVAL;
    int64_t values = 1, lists = 0;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return POSENC_EINVAL;
        lists += values;                    /* this level opens one list per element above it */
        if (shape[i] && values > JSON_F32_MAX_VALUES / shape[i]) return POSENC_EINVAL;
        values *= shape[i];
    }
    /* every number and its separator, each list's "[", "]" and separator, and the stores' slack */
    return values * (JSON_F32_MAX_CHARS + 1) + 3 * lists + JSON_F32_SLACK;
}

/* The lists of an array with no elements: nested to its first zero extent, "[]" there. */
static char *put_empty(char *p, const int64_t *shape, int ndim)
{
    *p++ = '[';
    if (shape[0] > 0 && ndim > 1) {
        for (int64_t i = 0; i < shape[0]; i++) {
            if (i) *p++ = ',';
            p = put_empty(p, shape + 1, ndim - 1);
        }
    }
    *p++ = ']';
    return p;
}

static int64_t write_json(json_row_fn row_fn, const float *values, const int64_t *shape, int ndim, char *out,
                          int64_t capacity)
{
    int64_t need = posenc_json_f32_capacity(shape, ndim);
    if (need < 0) return need;
    if (capacity < need) return -need;
    const uint32_t *bits = (const uint32_t *)(const void *)values;
    if (ndim == 0) return put_f32(out, bits[0]) - out;
    int64_t count = 1;
    for (int i = 0; i < ndim; i++) count *= shape[i];
    if (count == 0) return put_empty(out, shape, ndim) - out;
    int64_t index[64] = {0};                /* the outer indices of the current row */
    int64_t cols = shape[ndim - 1], rows = count / cols;
    char *p = out;
    memset(p, '[', (size_t)ndim);
    p += ndim;
    for (int64_t r = 0; r < rows; r++) {
        p = row_fn(p, bits + r * cols, cols);
        p[-1] = ']';                        /* the row's list replaces its last separator */
        int closed = 1, d = ndim - 2;       /* then close each outer list whose index wraps */
        while (d >= 0 && ++index[d] == shape[d]) {
            index[d--] = 0;
            *p++ = ']';
            closed++;
        }
        if (d < 0) break;                   /* the outermost list closed: the last row */
        *p++ = ',';
        memset(p, '[', (size_t)closed);
        p += closed;
    }
    return p - out;
}

int64_t posenc_json_f32(const float *values, const int64_t *shape, int ndim, char *out, int64_t capacity)
{
    static json_row_fn chosen;
    json_row_fn row_fn = __atomic_load_n(&chosen, __ATOMIC_RELAXED);
    if (!row_fn) {
        row_fn = row_for(active_name());
        __atomic_store_n(&chosen, row_fn, __ATOMIC_RELAXED);
    }
    return write_json(row_fn, values, shape, ndim, out, capacity);
}

int64_t posenc_json_f32_array(const posenc_json_array *array, const posenc_json_buffer *out)
{
    return posenc_json_f32(array->data, array->shape, array->ndim, out->data, out->capacity);
}

int64_t posenc_json_f32_by(const char *path, const float *values, const int64_t *shape, int ndim, char *out,
                           int64_t capacity)
{
    json_row_fn row_fn = row_for(path);
    return row_fn ? write_json(row_fn, values, shape, ndim, out, capacity) : POSENC_ENOISA;
}
