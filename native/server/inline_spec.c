#include "inline_spec.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "convert.h"
#include "posenc.h"
#include "posenc_crtrig.h"

/* Rows computed per kernel call: bounds scratch memory whatever the request size. */
#define CHUNK_BYTES (256u << 10)

static int bad(char *err, size_t errlen, const char *field, const char *what, uint64_t value) {
    snprintf(err, errlen, "spec.%s: %s, got %llu", field, what, (unsigned long long)value);
    return POSENC_STATUS_BAD_ARGUMENT;
}

/* Check that n float64 values are finite; *max_abs = the largest magnitude (0 when n == 0). */
static int check_finite(const uint8_t *raw, uint64_t n, const char *field, double *max_abs, char *err,
                        size_t errlen) {
    *max_abs = 0;
    for (uint64_t i = 0; i < n; i++) {
        double v = posenc_load_f64(raw + 8 * i);
        if (!isfinite(v)) {
            snprintf(err, errlen, "spec.%s: element %llu is not finite", field, (unsigned long long)i);
            return POSENC_STATUS_BAD_ARGUMENT;
        }
        if (fabs(v) > *max_abs)
            *max_abs = fabs(v);
    }
    return 0;
}

/* The columns [base, base + n) of a block lie inside [0, limit). */
static int block_fits(uint64_t base, uint64_t n, uint64_t limit) { return base + n <= limit; }

/* A block that runs past the columns the kernel writes, with the true arithmetic. */
static int bad_block(char *err, size_t errlen, const char *base_name, uint64_t base, const char *n_name, uint64_t n,
                     uint64_t filled, uint64_t zero_last) {
    snprintf(err, errlen, "spec.%s: %s %llu + %s %llu = %llu is past the %llu columns sin and cos fill (row_width %llu%s)",
             base_name, base_name, (unsigned long long)base, n_name, (unsigned long long)n,
             (unsigned long long)(base + n), (unsigned long long)filled, (unsigned long long)(filled + zero_last),
             zero_last ? " minus the zero_last column" : "");
    return POSENC_STATUS_BAD_ARGUMENT;
}

int inline_spec_parse(const uint8_t *aux, uint32_t aux_len, uint32_t max_dim, struct inline_spec *s, char *err,
                      size_t errlen) {
    if (aux_len < POSENC_SPEC_PREFIX_SIZE)
        return bad(err, errlen, "aux_len", "must hold at least the 32-byte spec prefix", aux_len);
    posenc_spec_prefix_decode(aux, &s->p);
    const struct posenc_spec_prefix *p = &s->p;
    if (p->flags & ~POSENC_SPEC_FLAGS_ALL)
        return bad(err, errlen, "flags", "has unknown bits (known: 1 interleaved, 2 zero_last, 4 column_scale)",
                   p->flags);
    if (p->row_width < 1 || p->row_width > max_dim)
        return bad(err, errlen, "row_width", "must be in [1, --max-dim]", p->row_width);
    if (p->n_freq < 1)
        return bad(err, errlen, "n_freq", "must be >= 1", p->n_freq);
    if (p->n_cos > p->n_freq)
        return bad(err, errlen, "n_cos", "must be <= n_freq", p->n_cos);
    uint64_t zero_last = (p->flags & POSENC_SPEC_ZERO_LAST) ? 1 : 0;
    uint64_t columns = (uint64_t)p->n_freq + p->n_cos + zero_last;
    if (columns != p->row_width)
        return bad(err, errlen, "row_width", "must equal n_freq + n_cos (+1 with zero_last)", p->row_width);
    uint64_t filled = p->row_width - zero_last; /* columns the kernel writes: [0, filled) */
    if (p->flags & POSENC_SPEC_INTERLEAVED) {
        if (p->n_cos + 1 < p->n_freq) /* sin at 2i, cos at 2i+1: at most one lone trailing sin */
            return bad(err, errlen, "n_cos", "must be n_freq or n_freq - 1 when interleaved", p->n_cos);
        if (p->sin_base || p->cos_base)
            return bad(err, errlen, p->sin_base ? "sin_base" : "cos_base", "must be 0 when interleaved",
                       p->sin_base ? p->sin_base : p->cos_base);
    } else {
        /* the kernel writes columns [0, filled); an empty cos block (n_cos = 0) places nothing,
         * so its cos_base is not looked at */
        if (!block_fits(p->sin_base, p->n_freq, filled))
            return bad_block(err, errlen, "sin_base", p->sin_base, "n_freq", p->n_freq, filled, zero_last);
        if (p->n_cos && !block_fits(p->cos_base, p->n_cos, filled))
            return bad_block(err, errlen, "cos_base", p->cos_base, "n_cos", p->n_cos, filled, zero_last);
        int disjoint = p->n_cos == 0 || (uint64_t)p->sin_base + p->n_freq <= p->cos_base ||
                       (uint64_t)p->cos_base + p->n_cos <= p->sin_base;
        if (!disjoint)
            return bad(err, errlen, "cos_base", "overlaps the sin columns", p->cos_base);
    }
    uint64_t scale_len = (p->flags & POSENC_SPEC_COLUMN_SCALE) ? p->row_width : 0;
    uint64_t expected = POSENC_SPEC_PREFIX_SIZE + 8 * ((uint64_t)p->n_freq + scale_len);
    if (expected != aux_len)
        return bad(err, errlen, "aux_len", "must be 32 + 8*n_freq (+ 8*row_width with column_scale)",
                   aux_len);
    if (!isfinite(p->amplitude)) {
        snprintf(err, errlen, "spec.amplitude: must be finite");
        return POSENC_STATUS_BAD_ARGUMENT;
    }
    s->freqs = aux + POSENC_SPEC_PREFIX_SIZE;
    s->scale = scale_len ? s->freqs + 8 * (size_t)p->n_freq : NULL;
    int rc = check_finite(s->freqs, p->n_freq, "freqs", &s->max_freq, err, errlen);
    if (rc == 0 && s->scale)
        rc = check_finite(s->scale, scale_len, "scale", &s->max_scale, err, errlen);
    else
        s->max_scale = 1.0;
    return rc;
}

/* Whether |value| <= |amplitude| * max|scale| stays finite through the arithmetic of
 * inline_spec_rows: float64 products cast once, or (float32 output with COLUMN_SCALE) the
 * float32 product of float32(amplitude * sin) and float32(scale[j]). */
static int values_fit(const struct inline_spec *s, unsigned wire_dtype) {
    double amp = fabs(s->p.amplitude);
    if (wire_dtype == POSENC_DTYPE_FLOAT32 && s->scale) {
        float a = (float)amp, k = (float)s->max_scale;
        return isfinite(a) && isfinite(k) && isfinite(a * k);
    }
    return convert_fits(amp * s->max_scale, wire_dtype);
}

int inline_spec_check_range(const struct inline_spec *s, const double *positions, uint32_t n, unsigned wire_dtype,
                            char *err, size_t errlen) {
    static const char *const DTYPE_NAMES[] = {"float32", "float16", "bfloat16", "float64"};
    for (uint32_t k = 0; k < n; k++) {
        if (!isfinite(positions[k] * s->max_freq)) { /* the largest angle this position makes */
            snprintf(err, errlen, "positions: element %u is %.17g, and times the largest |spec.freqs| (%.17g) the "
                     "angle overflows float64", k, positions[k], s->max_freq);
            return POSENC_STATUS_POSITION_OUT_OF_RANGE;
        }
    }
    if (!values_fit(s, wire_dtype)) { /* count 0 too: the spec itself cannot give finite rows */
        const char *field = s->scale && convert_fits(s->p.amplitude, wire_dtype) ? "scale" : "amplitude";
        snprintf(err, errlen, "spec.%s: |amplitude| %.17g times the largest |scale| %.17g overflows %s", field,
                 s->p.amplitude, s->max_scale, DTYPE_NAMES[wire_dtype]);
        return POSENC_STATUS_BAD_ARGUMENT;
    }
    return 0;
}

/* Apply the per-column scale and the trailing zero column to `rows` computed rows. */
static void finish_rows(const struct inline_spec *s, const double *scale, void *rows, int is_f64, size_t n) {
    const size_t width = s->p.row_width;
    const int zero_last = (s->p.flags & POSENC_SPEC_ZERO_LAST) != 0;
    for (size_t r = 0; r < n; r++) {
        if (is_f64) {
            double *row = (double *)rows + r * width;
            if (zero_last)
                row[width - 1] = 0.0;
            for (size_t j = 0; scale && j < width; j++)
                row[j] *= scale[j];
        } else {
            float *row = (float *)rows + r * width;
            if (zero_last)
                row[width - 1] = 0.0f;
            for (size_t j = 0; scale && j < width; j++)
                row[j] *= (float)scale[j];
        }
    }
}

posenc_sincos_plan *inline_spec_plan(const struct inline_spec *s) {
    double *freqs = malloc(2 * sizeof(double) * s->p.n_freq), *amp = freqs ? freqs + s->p.n_freq : NULL;
    if (!freqs)
        return NULL;
    for (uint32_t i = 0; i < s->p.n_freq; i++) {
        freqs[i] = posenc_load_f64(s->freqs + 8 * (size_t)i);
        amp[i] = s->p.amplitude;
    }
    posenc_sincos_plan *plan = posenc_sincos_plan_new(freqs, amp, s->p.n_freq); /* copies them */
    free(freqs);
    return plan;
}

/* 16-bit rows converted from their float64 values y: a value whose rounding y does not decide (y
 * within POSENC_SINCOS_ERROR |amp| of a rounding boundary of the format: about one in 2^34, and
 * never an exact 0 the conversion keeps) is replaced by the exact value rounded once
 * (posenc_crtrig.h), as the library does (posenc.api._tables.cast_exact). Columns that hold no
 * sin or cos (a zero last column) are left as they are. */
static void round_half_rows_exactly(const struct inline_spec *s, const double *rows, const double *positions,
                                    size_t n_rows, uint8_t *dst, unsigned wire_dtype) {
    const struct posenc_spec_prefix *p = &s->p;
    const size_t width = p->row_width;
    const double err = POSENC_SINCOS_ERROR * fabs(p->amplitude);
    const int format = wire_dtype == POSENC_DTYPE_FLOAT16 ? PCT_FLOAT16 : PCT_BFLOAT16;
    const int interleaved = (p->flags & POSENC_SPEC_INTERLEAVED) != 0;
    for (size_t r = 0; r < n_rows; r++)
        for (size_t j = 0; j < width; j++) {
            double y = rows[r * width + j], ends[2] = {y - err, y + err};
            uint16_t rounded[2];
            convert_values(ends, 1, rounded, wire_dtype, 2);
            if (rounded[0] == rounded[1] || isnan(y))
                continue;
            int64_t i = -1;
            int cosine = 0;
            if (interleaved) {
                i = (int64_t)(j / 2), cosine = (int)(j % 2);
                if (i >= (int64_t)(cosine ? p->n_cos : p->n_freq))
                    i = -1;
            } else if (j >= p->sin_base && j < (size_t)p->sin_base + p->n_freq) {
                i = (int64_t)(j - p->sin_base);
            } else if (j >= p->cos_base && j < (size_t)p->cos_base + p->n_cos) {
                i = (int64_t)(j - p->cos_base), cosine = 1;
            }
            if (i < 0)
                continue;
            double exact = posenc_cr_sincos_rounded(positions[r], posenc_load_f64(s->freqs + 8 * (size_t)i),
                                                    p->amplitude, cosine, format);
            convert_values(&exact, 1, dst + 2 * (r * width + j), wire_dtype, 1); /* exact: a value of the format */
        }
}

int inline_spec_rows(const struct inline_spec *s, const double *positions, uint32_t n, unsigned wire_dtype,
                     uint8_t *dst, struct buf *scratch, posenc_sincos_plan *plan) {
    const struct posenc_spec_prefix *p = &s->p;
    const int is_f64 = wire_dtype != POSENC_DTYPE_FLOAT32;
    const size_t item = is_f64 ? 8 : 4, width = p->row_width;
    const size_t scale_len = s->scale ? width : 0;
    size_t chunk = CHUNK_BYTES / (width * item);
    if (chunk < 1)
        chunk = 1;
    if (chunk > n)
        chunk = n;
    /* scratch: freqs and amplitudes (without a plan), scale (float64 each), then one chunk of rows */
    size_t params = 8 * ((plan ? 0 : 2 * (size_t)p->n_freq) + scale_len);
    scratch->pos = scratch->len = 0;
    if (buf_reserve(scratch, params + chunk * width * item, SIZE_MAX) != 0)
        return -1;
    double *freqs = (double *)scratch->data, *amp = freqs + p->n_freq;
    double *scale = plan ? (double *)scratch->data : amp + p->n_freq;
    void *rows = scratch->data + params;
    for (uint32_t i = 0; !plan && i < p->n_freq; i++) {
        freqs[i] = posenc_load_f64(s->freqs + 8 * (size_t)i);
        amp[i] = p->amplitude;
    }
    for (size_t j = 0; j < scale_len; j++)
        scale[j] = posenc_load_f64(s->scale + 8 * j);
    const posenc_layout layout = {
        .row_stride = (int64_t)width,
        .sin_base = p->sin_base,
        .cos_base = p->cos_base,
        .n_cos = p->n_cos,
        .interleaved = (p->flags & POSENC_SPEC_INTERLEAVED) != 0,
    };
    const size_t out_row = width * posenc_dtype_size(wire_dtype);
    for (size_t lo = 0; lo < n; lo += chunk) {
        size_t rows_now = n - lo < chunk ? n - lo : chunk;
        int dtype = is_f64 ? POSENC_F64 : POSENC_F32;
        int rc = plan ? posenc_sincos_plan_rows(plan, positions + lo, (int64_t)rows_now, &layout, rows, dtype)
                      : posenc_sincos_rows(positions + lo, (int64_t)rows_now, freqs, amp, p->n_freq, &layout, rows,
                                           dtype);
        if (rc != POSENC_OK)
            return -1;
        finish_rows(s, scale_len ? scale : NULL, rows, is_f64, rows_now);
        convert_values(rows, is_f64, dst + lo * out_row, wire_dtype, rows_now * width);
        if (posenc_dtype_size(wire_dtype) == 2 && !scale_len) /* float32 rows are rounded exactly by the kernel */
            round_half_rows_exactly(s, rows, positions + lo, rows_now, dst + lo * out_row, wire_dtype);
    }
    return 0;
}
