/* Vectorised float64 sin and cos of the exact product x*w, ISA-neutral (uses a simd_*.h layer).
 *
 * This is the one sincos of posenc: service/posenc/kernels/trig.py spells out the same
 * operation sequence for numba, so every path (numba, scalar, AVX2, AVX-512) gives the same
 * bits for the same (x, w). Each lane depends only on its own inputs (no cross-lane choices:
 * where a vector takes a slower step because one lane needs it, every lane's result is
 * selected by that lane's own test).
 *
 * The angle is never rounded: A = x*w is carried as the double-double a_hi + a_lo
 * (a_hi = x*w, a_lo = fma(x, w, -a_hi): exact barring overflow, and underflow of a_lo below
 * 2^-1074, which only |A| < 2^-969 can meet, where the lost part is below 2^-1074).
 *
 * Reduction for |a_hi| <= SMALL_MAX = 2^45: k = round(a_hi * 2/pi) by the 1.5*2^52 trick in one
 * fma, pi/2 = PIO2_1 + PIO2_2 + PIO2_3 + e (|e| < 2^-163), and
 *   d = a_hi - k*PIO2_1                exact in one fma: |d| < 0.8 is a multiple of 2^-52 (for
 *                                      |a_hi| >= 2), or Sterbenz applies (|k| <= 1)
 *   h + l = -k*PIO2_2                  exact (two_prod; |h| < 2^-9)
 *   r + r_lo = d + h + a_lo + (l - k*PIO2_3), two error-free two_sums, so only r_lo rounds:
 *                                      |r| <= pi/4 + 2^-7, |r_lo| <= 2^-53 + 2^-62
 * and r + r_lo is off the true A - k*pi/2 by less than 2^-104 (r_lo's roundings, 2^-105 and
 * 2^-116, and |k| |e| < 2^-119).
 * Larger angles, |a_hi| <= EXACT_MAX = 2^62 (every |p| <= 2^53 times |w| <= 2^9), first lose a
 * multiple n of 2*pi exactly: n = a_hi/(2*pi) rounded to a multiple of 2^9, 2*pi in the three
 * parts TWOPI_i = 4*PIO2_i; a_hi - fl(n*TWOPI_1) is exact (Sterbenz), the two products' low
 * parts exact (two_prod), summed with three two_sums into b_hi + b_lo with |b_hi| < 2^12 and
 * |b_lo| < 2^-40, off the true A - 2*pi*n by less than 2^-90 (b_lo's roundings; |n| 4|e| <
 * 2^-101); then the step above. So up to 2^62 the reduced angle is within 2^-90 of the exact
 * one, within 2^-104 up to 2^45 (every part of a position below 2^45 / |w|).
 * Beyond EXACT_MAX (and NaN/inf): libm's sin/cos of a_hi and of a_lo, joined by one angle
 * addition (glibc reduces exactly; lane by lane, far outside posenc's positions).
 *
 * The polynomials are fdlibm's __kernel_sin / __kernel_cos on r (error < 1 ulp on |r| <= pi/4;
 * at pi/4 + 2^-7 the polynomials themselves are still within 0.09 ulp of sin and cos), with
 * the first-order terms of r_lo inside their final addition:
 *   sin = r + (r^3 P(z) + r_lo (1 - z/2)),   cos = (1 - z/2) + (tail(z) - r_lo r)
 * (what this leaves out, r_lo r^3/6, r_lo z^2/24 and r_lo^2/2, is below 2^-56.5). Measured
 * against mpmath (tests/test_exact_angles.py, products closest to multiples of pi/2 up to 2^60):
 * within 1 ulp of the exact sin and cos plus the reduction's absolute error above (2 ulp once,
 * for a value of 1.8e-14 past 2^45: 2^-97). */
#ifndef POSENC_VSINCOS_H
#define POSENC_VSINCOS_H

#include <math.h>

#define SMALL_MAX 0x1p45
#define EXACT_MAX 0x1p62
#define TWO_OVER_PI 0x1.45f306dc9c883p-1
#define INV_TWO_PI 0x1.45f306dc9c883p-3
#define PIO2_1 0x1.921fb54442d18p+0
#define PIO2_2 0x1.1a62633145c07p-54
#define PIO2_3 -0x1.f1976b7ed8fbcp-110
#define TWOPI_1 0x1.921fb54442d18p+2
#define TWOPI_2 0x1.1a62633145c07p-52
#define TWOPI_3 -0x1.f1976b7ed8fbcp-108
/* adding 1.5*2^52 rounds to an integer and leaves it in the low mantissa bits (|x| < 2^51) */
#define ROUND_MAGIC 0x1.8p52
/* adding 1.5*2^61 rounds to a multiple of 2^9 (|x| < 2^60), the counts of 2*pi removed */
#define ROUND_MAGIC_2PI 0x1.8p61

#define S1 -1.66666666666666324348e-01
#define S2 8.33333333332248946124e-03
#define S3 -1.98412698298579493134e-04
#define S4 2.75573137070700676789e-06
#define S5 -2.50507602534068634195e-08
#define S6 1.58969099521155010221e-10
#define C1 4.16666666666666019037e-02
#define C2 -1.38888888888741095749e-03
#define C3 2.48015872894767294178e-05
#define C4 -2.75573143513906633035e-07
#define C5 2.08757232129817482790e-09
#define C6 -1.13596475577881948265e-11

/* s + *err == a + b exactly, s = fl(a + b) (Knuth's two_sum: no condition on magnitudes) */
static inline vd v_two_sum(vd a, vd b, vd *err) {
    vd s = v_add(a, b);
    vd b_virtual = v_sub(s, a);
    *err = v_add(v_sub(a, v_sub(s, b_virtual)), v_sub(b, b_virtual));
    return s;
}

/* sin and cos of a_hi + a_lo for |a_hi| <= SMALL_MAX, |a_lo| <= 2^-7 (see the header). */
static inline void v_sincos_small(vd a_hi, vd a_lo, vd *sin_out, vd *cos_out) {
    vd t = v_fmadd(a_hi, v_set1(TWO_OVER_PI), v_set1(ROUND_MAGIC));
    vd k = v_sub(t, v_set1(ROUND_MAGIC));
    vd d = v_fnmadd(k, v_set1(PIO2_1), a_hi);
    vd h = v_mul(k, v_set1(-PIO2_2)); /* h + l = -k*PIO2_2 exactly */
    vd l = v_fmsub(k, v_set1(-PIO2_2), h);
    vd e1, e2;
    vd s = v_two_sum(d, h, &e1);
    vd r = v_two_sum(s, a_lo, &e2);
    vd r_lo = v_add(v_add(e1, e2), v_fnmadd(k, v_set1(PIO2_3), l));

    vd z = v_mul(r, r), w = v_mul(z, z);
    /* sin(r) = r + r^3 (S1 + z (S2 + ...)) + r_lo cos(r) */
    vd ps = v_fmadd(z, v_fmadd(z, v_set1(S4), v_set1(S3)), v_set1(S2));
    ps = v_fmadd(v_mul(z, w), v_fmadd(z, v_set1(S6), v_set1(S5)), ps);
    vd hz = v_mul(z, v_set1(0.5));
    vd one_minus_hz = v_sub(v_set1(1.0), hz);
    vd sin_r = v_add(r, v_fmadd(v_mul(z, r), v_fmadd(z, ps, v_set1(S1)), v_mul(r_lo, one_minus_hz)));
    /* cos(r) = (1 - z/2) + (((1 - (1 - z/2)) - z/2) + z*pc - r_lo sin(r)), fdlibm's split */
    vd pc = v_mul(z, v_fmadd(z, v_fmadd(z, v_set1(C3), v_set1(C2)), v_set1(C1)));
    pc = v_fmadd(v_mul(w, w), v_fmadd(z, v_fmadd(z, v_set1(C6), v_set1(C5)), v_set1(C4)), pc);
    vd tail = v_fmadd(z, pc, v_sub(v_sub(v_set1(1.0), one_minus_hz), hz));
    vd cos_r = v_add(one_minus_hz, v_fnmadd(r_lo, r, tail));

    /* quadrant q = k mod 4: bit 0 swaps sin and cos, bit 1 of q (of q+1) negates sin (cos) */
    vi q = v_bits(t);
    vi sign = vi_set1(INT64_MIN);
    vi swap = vi_shl(q, 63);
    vd sv = v_select_sign(swap, cos_r, sin_r);
    vd cv = v_select_sign(swap, sin_r, cos_r);
    *sin_out = v_xor_bits(sv, vi_and(vi_shl(q, 62), sign));
    *cos_out = v_xor_bits(cv, vi_and(vi_shl(vi_add(q, vi_set1(1)), 62), sign));
}

/* b_hi + b_lo = a_hi + a_lo - n*2*pi, |b_hi| < 2^12, for |a_hi| <= EXACT_MAX (see the header). */
static inline void v_reduce_two_pi(vd a_hi, vd a_lo, vd *b_hi, vd *b_lo) {
    vd n = v_sub(v_fmadd(a_hi, v_set1(INV_TWO_PI), v_set1(ROUND_MAGIC_2PI)), v_set1(ROUND_MAGIC_2PI));
    vd m1 = v_mul(n, v_set1(TWOPI_1));
    vd minus_m1_lo = v_fnmadd(n, v_set1(TWOPI_1), m1); /* m1 - n*TWOPI_1, exact */
    vd m2 = v_mul(n, v_set1(-TWOPI_2));                /* m2 + m2_lo = -n*TWOPI_2 exactly */
    vd m2_lo = v_fmsub(n, v_set1(-TWOPI_2), m2);
    vd e1, e2, e3;
    vd s = v_two_sum(v_sub(a_hi, m1), a_lo, &e1);
    s = v_two_sum(s, minus_m1_lo, &e2);
    *b_hi = v_two_sum(s, m2, &e3);
    *b_lo = v_add(v_add(v_add(e1, e2), e3), v_fnmadd(n, v_set1(TWOPI_3), m2_lo));
}

/* sin and cos of the exact x*w in every lane. Lanes beyond SMALL_MAX first lose a multiple of
 * 2*pi, lanes beyond EXACT_MAX (or NaN) take libm, each selected by its own angle, so a
 * lane's result never depends on its neighbours (the vector width differs per path). */
static inline void v_sincos_product(vd x, vd w, vd *sin_out, vd *cos_out) {
    vd a_hi = v_mul(x, w);
    vd a_lo = v_fmsub(x, w, a_hi);
    vd magnitude = v_abs(a_hi);
    if (!v_all_le(magnitude, v_set1(SMALL_MAX))) {
        vd b_hi, b_lo;
        v_reduce_two_pi(a_hi, a_lo, &b_hi, &b_lo);
        a_hi = v_select_le(magnitude, v_set1(SMALL_MAX), a_hi, b_hi);
        a_lo = v_select_le(magnitude, v_set1(SMALL_MAX), a_lo, b_lo);
    }
    v_sincos_small(a_hi, a_lo, sin_out, cos_out);
    if (v_all_le(magnitude, v_set1(EXACT_MAX)))
        return;
    double xs[VW], ws[VW], ss[VW], cs[VW];
    v_store(xs, x);
    v_store(ws, w);
    v_store(ss, *sin_out);
    v_store(cs, *cos_out);
    for (int lane = 0; lane < VW; lane++) {
        double hi = xs[lane] * ws[lane];
        if (!(fabs(hi) <= EXACT_MAX)) {
            double lo = fma(xs[lane], ws[lane], -hi);
            double sin_hi = sin(hi), cos_hi = cos(hi), sin_lo = sin(lo), cos_lo = cos(lo);
            ss[lane] = fma(sin_hi, cos_lo, cos_hi * sin_lo);
            cs[lane] = fma(cos_hi, cos_lo, -(sin_hi * sin_lo));
        }
    }
    *sin_out = v_load(ss);
    *cos_out = v_load(cs);
}

#endif
