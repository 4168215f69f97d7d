#include "positions.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "posenc_proto.h"

static int out_of_range(char *err, size_t errlen, uint32_t k, const char *value, const char *range) {
    snprintf(err, errlen, "positions: element %u is %s, outside %s", k, value, range);
    return POSENC_STATUS_POSITION_OUT_OF_RANGE;
}

/* NaN and infinities: no limit would admit them, so the message names none to raise. */
static int not_finite(char *err, size_t errlen, uint32_t k, double p) {
    const char *shown = isnan(p) ? "nan" : p > 0 ? "inf" : "-inf";
    snprintf(err, errlen, "positions: element %u is %s, not finite", k, shown);
    return POSENC_STATUS_POSITION_OUT_OF_RANGE;
}

int positions_to_rows(const uint8_t *raw, uint32_t count, unsigned kind, int64_t start, int64_t n_rows,
                      int64_t *rows, char *err, size_t errlen) {
    char value[48], range[80];
    for (uint32_t k = 0; k < count; k++) {
        if (kind == POSENC_POSITIONS_INT64) {
            int64_t p = (int64_t)posenc_load_u64(raw + 8 * (size_t)k);
            if (p >= start && (uint64_t)p - (uint64_t)start < (uint64_t)n_rows) {
                rows[k] = (int64_t)((uint64_t)p - (uint64_t)start);
                continue;
            }
            snprintf(value, sizeof value, "%" PRId64, p);
        } else {
            double p = posenc_load_f64(raw + 8 * (size_t)k);
            if (!isfinite(p))
                return not_finite(err, errlen, k, p);
            if (p != floor(p)) {
                snprintf(err, errlen, "positions: element %u is %.17g; table rows need integer positions", k, p);
                return POSENC_STATUS_POSITION_OUT_OF_RANGE;
            }
            if (p >= (double)start && p < (double)start + (double)n_rows) {
                rows[k] = (int64_t)p - start;
                continue;
            }
            snprintf(value, sizeof value, "%.17g", p);
        }
        snprintf(range, sizeof range, "the table's positions [%" PRId64 ", %" PRId64 ")", start, start + n_rows);
        return out_of_range(err, errlen, k, value, range);
    }
    return 0;
}

int positions_to_f64(const uint8_t *raw, uint32_t count, unsigned kind, uint64_t max_abs, double *out,
                     char *err, size_t errlen) {
    char value[48], range[96];
    for (uint32_t k = 0; k < count; k++) {
        if (kind == POSENC_POSITIONS_INT64) {
            /* compared as integers: (double)i would round 2^53 + 1 down to 2^53 and let it in */
            int64_t i = (int64_t)posenc_load_u64(raw + 8 * (size_t)k);
            if (i >= -(int64_t)max_abs && i <= (int64_t)max_abs) {
                out[k] = (double)i; /* exact: |i| <= 2^53 */
                continue;
            }
            snprintf(value, sizeof value, "%" PRId64, i);
        } else {
            double p = posenc_load_f64(raw + 8 * (size_t)k);
            if (!isfinite(p))
                return not_finite(err, errlen, k, p);
            if (fabs(p) <= (double)max_abs) { /* max_abs <= 2^53 is exact in float64 */
                out[k] = p;
                continue;
            }
            snprintf(value, sizeof value, "%.17g", p);
        }
        snprintf(range, sizeof range, "this server's limit |p| <= %" PRIu64 " (max_abs_position)", max_abs);
        snprintf(err, errlen, "positions: element %u is %s, beyond %s", k, value, range);
        return POSENC_STATUS_POSITION_OUT_OF_RANGE;
    }
    return 0;
}

int positions_in_table(double *values, uint32_t count, int64_t start, int64_t stop, double offset, uint64_t max_abs,
                       char *err, size_t errlen) {
    char value[48], range[96];
    for (uint32_t k = 0; k < count; k++) {
        double p = values[k]; /* finite, |p| <= max_abs <= 2^53: its floor and ceil convert exactly */
        if ((int64_t)ceil(p) < start || (int64_t)floor(p) >= stop) {
            snprintf(value, sizeof value, "%.17g", p);
            snprintf(range, sizeof range, "the table's positions [%" PRId64 ", %" PRId64 ")", start, stop);
            return out_of_range(err, errlen, k, value, range);
        }
        double moved = p + offset;
        if (!(fabs(moved) <= (double)max_abs)) {
            snprintf(err, errlen, "positions: element %u is %.17g, and plus the table's offset %.17g beyond this "
                     "server's limit |p| <= %" PRIu64 " (max_abs_position)", k, p, offset, max_abs);
            return POSENC_STATUS_POSITION_OUT_OF_RANGE;
        }
        values[k] = moved;
    }
    return 0;
}
