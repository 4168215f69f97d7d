/* ENCODE_SPEC: an encoding described inline by its frequencies, amplitude and column plan
 * (docs/protocol.md). The client derives those from any sinusoidal or RoPE spec, so the
 * server needs no knowledge of RoPE scaling variants: it only evaluates sin and cos. */
#ifndef POSENC_SERVER_INLINE_SPEC_H
#define POSENC_SERVER_INLINE_SPEC_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "posenc.h"
#include "posenc_proto.h"

struct inline_spec {
    struct posenc_spec_prefix p;
    const uint8_t *freqs; /* n_freq little-endian float64 (in the request, unaligned) */
    const uint8_t *scale; /* row_width float64, or NULL */
    double max_freq;      /* max |freqs[i]| */
    double max_scale;     /* max |scale[j]| (1 without COLUMN_SCALE) */
};

/* Decode and check an aux block: every column written exactly once, finite numbers, widths
 * within max_dim. Returns 0 or POSENC_STATUS_BAD_ARGUMENT with `err` naming the field. */
int inline_spec_parse(const uint8_t *aux, uint32_t aux_len, uint32_t max_dim, struct inline_spec *s, char *err,
                      size_t errlen);

/* Refuse finite inputs whose rows would not be finite: an angle p * w that overflows float64,
 * or amplitude * scale beyond what `wire_dtype` holds. Returns 0 or a POSENC_STATUS_* with
 * `err` naming the field (positions / spec.amplitude / spec.scale). */
int inline_spec_check_range(const struct inline_spec *s, const double *positions, uint32_t n, unsigned wire_dtype,
                            char *err, size_t errlen);

/* A kernel plan of the spec's frequencies and amplitude (posenc_sincos_plan: its part caches kept
 * between calls), for a spec served again and again (a named computed table); NULL when memory is short. */
posenc_sincos_plan *inline_spec_plan(const struct inline_spec *s);

/* Rows for n positions, cast to wire_dtype, written to dst (unaligned). Computes in float32
 * for float32 output and float64 otherwise (one rounding to the half types), a chunk of rows
 * at a time in `scratch`, through `plan` (inline_spec_plan of this spec) when there is one.
 * Returns 0, or -1 when scratch memory is short or the kernel fails. */
int inline_spec_rows(const struct inline_spec *s, const double *positions, uint32_t n, unsigned wire_dtype,
                     uint8_t *dst, struct buf *scratch, posenc_sincos_plan *plan);

#endif
