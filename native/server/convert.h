/* Casting rows to the dtype a client asked for. Tables and kernels produce float32 or
 * float64; float16 and bfloat16 are rounded once, to nearest even, from those values. */
#ifndef POSENC_SERVER_CONVERT_H
#define POSENC_SERVER_CONVERT_H

#include <stddef.h>

/* Write n values from src (native float32 when src_is_f64 == 0, else float64) to dst as
 * wire dtype POSENC_DTYPE_*; dst needs no alignment. */
void convert_values(const void *src, int src_is_f64, void *dst, unsigned wire_dtype, size_t n);

/* Whether every value of magnitude <= |x| stays finite once rounded to wire dtype POSENC_DTYPE_*
 * (round to nearest even overflows to inf at (2 - 2^-p) * 2^emax, p the significand bits). */
int convert_fits(double x, unsigned wire_dtype);

#endif
