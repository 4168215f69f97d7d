/* Decoding and checking the positions that follow a request's aux block. */
#ifndef POSENC_SERVER_POSITIONS_H
#define POSENC_SERVER_POSITIONS_H

#include <stddef.h>
#include <stdint.h>

/* Table row indices: each position (int64, or float64 with an integer value) minus `start`,
 * checked to lie in [0, n_rows). Returns 0, or a POSENC_STATUS_* with `err` naming the field. */
int positions_to_rows(const uint8_t *raw, uint32_t count, unsigned kind, int64_t start, int64_t n_rows,
                      int64_t *rows, char *err, size_t errlen);

/* Positions as float64 (any finite value with |p| <= max_abs, which is at most 2^53). Same return
 * convention; NaN and infinities are refused as not finite. */
int positions_to_f64(const uint8_t *raw, uint32_t count, unsigned kind, uint64_t max_abs, double *out,
                     char *err, size_t errlen);

/* A named computed table's positions (from positions_to_f64): each in [start, stop), then moved by the
 * table's `offset` in place, the sum still within |p| <= max_abs. Same return convention. */
int positions_in_table(double *values, uint32_t count, int64_t start, int64_t stop, double offset, uint64_t max_abs,
                       char *err, size_t errlen);

#endif
