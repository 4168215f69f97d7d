#include "convert.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "posenc_proto.h"

/* x rounded to nearest even in a binary format with `mant` stored mantissa bits and `ebits`
 * exponent bits (float16: 10, 5; bfloat16: 7, 8), subnormals and overflow to inf included. */
static uint16_t round_to_half(double x, int mant, int ebits) {
    const int bias = (1 << (ebits - 1)) - 1, emin = 1 - bias;
    const uint16_t sign = signbit(x) ? (uint16_t)(1u << (mant + ebits)) : 0;
    const uint16_t inf = (uint16_t)(((1u << ebits) - 1) << mant);
    if (isnan(x))
        return sign | inf | (uint16_t)(1u << (mant - 1));
    double a = fabs(x);
    if (isinf(a))
        return sign | inf;
    if (a == 0)
        return sign;
    int e;
    frexp(a, &e);
    e -= 1; /* a = m * 2^e, 1 <= m < 2 */
    int quantum = (e < emin ? emin : e) - mant;
    double r = ldexp(rint(ldexp(a, -quantum)), quantum); /* exact: the grid of the target format */
    if (r == 0)
        return sign;
    frexp(r, &e);
    e -= 1; /* rounding may have carried into the next binade */
    if (e > bias)
        return sign | inf;
    if (e < emin)
        return sign | (uint16_t)ldexp(r, mant - emin);
    return sign | (uint16_t)((e + bias) << mant) | (uint16_t)(ldexp(r, mant - e) - (1 << mant));
}

static double load(const void *src, int src_is_f64, size_t i) {
    return src_is_f64 ? ((const double *)src)[i] : (double)((const float *)src)[i];
}

void convert_values(const void *src, int src_is_f64, void *dst, unsigned wire_dtype, size_t n) {
    uint8_t *out = dst;
    if ((wire_dtype == POSENC_DTYPE_FLOAT64) == (src_is_f64 != 0) &&
        (wire_dtype == POSENC_DTYPE_FLOAT64 || wire_dtype == POSENC_DTYPE_FLOAT32)) {
        memcpy(out, src, n * (src_is_f64 ? 8 : 4));
        return;
    }
    switch (wire_dtype) {
    case POSENC_DTYPE_FLOAT32:
        for (size_t i = 0; i < n; i++) {
            float v = (float)load(src, src_is_f64, i);
            memcpy(out + 4 * i, &v, 4);
        }
        break;
    case POSENC_DTYPE_FLOAT64:
        for (size_t i = 0; i < n; i++) {
            double v = load(src, src_is_f64, i);
            memcpy(out + 8 * i, &v, 8);
        }
        break;
    case POSENC_DTYPE_FLOAT16:
    case POSENC_DTYPE_BFLOAT16: {
        int mant = wire_dtype == POSENC_DTYPE_FLOAT16 ? 10 : 7;
        int ebits = wire_dtype == POSENC_DTYPE_FLOAT16 ? 5 : 8;
        for (size_t i = 0; i < n; i++) {
            uint16_t v = round_to_half(load(src, src_is_f64, i), mant, ebits);
            out[2 * i] = (uint8_t)v;
            out[2 * i + 1] = (uint8_t)(v >> 8);
        }
        break;
    }
    }
}

int convert_fits(double x, unsigned wire_dtype) {
    double a = fabs(x);
    switch (wire_dtype) {
    case POSENC_DTYPE_FLOAT32: return a < ldexp(2.0 - ldexp(1.0, -24), 127);
    case POSENC_DTYPE_FLOAT16: return a < ldexp(2.0 - ldexp(1.0, -11), 15);
    case POSENC_DTYPE_BFLOAT16: return a < ldexp(2.0 - ldexp(1.0, -8), 127);
    default: return isfinite(a);
    }
}
