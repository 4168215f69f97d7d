/* Vectorised float64 sin and cos of the same angles, ISA-neutral (uses a simd_*.h layer).
 *
 * This is the one sincos of posenc: service/posenc/kernels/trig.py spells out the same
 * operation sequence for numba, so every path (numba, scalar, AVX2, AVX-512) gives the same
 * bits for the same angle. Each lane depends only on its own angle (no cross-lane choices).
 *
 * Range reduction: x = k*(pi/2) + r with k = round(x*2/pi) (the 1.5*2^52 trick) and pi/2 split
 * into three float64 parts PIO2_1 + PIO2_2 + PIO2_3 (159 bits), subtracted with fused
 * multiply-adds: x - k*PIO2_1 is exact (both are multiples of 2^-52 and the difference is
 * below 2), the next two steps round once each, so r is within ~1 ulp of the true reduced
 * angle for |x| <= REDUCE_MAX = 2^40 (k*2/pi rounding keeps |r| <= pi/4 + 2^-12 there).
 * Lanes beyond it, and NaN/inf, take libm sin/cos (far outside posenc's accurate range).
 * The polynomials are fdlibm's __kernel_sin / __kernel_cos (error < 1 ulp on |r| <= pi/4).
 */
#ifndef POSENC_VSINCOS_H
#define POSENC_VSINCOS_H

#include <math.h>

#define REDUCE_MAX 0x1p40
#define TWO_OVER_PI 0x1.45f306dc9c883p-1
#define PIO2_1 0x1.921fb54442d18p+0
#define PIO2_2 0x1.1a62633145c07p-54
#define PIO2_3 -0x1.f1976b7ed8fbcp-110
/* adding 1.5*2^52 rounds to an integer and leaves it in the low mantissa bits */
#define ROUND_MAGIC 0x1.8p52

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

static inline void v_sincos_reduced(vd x, vd *sin_out, vd *cos_out) {
    vd t = v_add(v_mul(x, v_set1(TWO_OVER_PI)), v_set1(ROUND_MAGIC));
    vd k = v_sub(t, v_set1(ROUND_MAGIC));
    vd r = v_fnmadd(k, v_set1(PIO2_1), x);
    r = v_fnmadd(k, v_set1(PIO2_2), r);
    r = v_fnmadd(k, v_set1(PIO2_3), r);

    vd z = v_mul(r, r), w = v_mul(z, z);
    /* sin(r) = r + r^3 (S1 + z (S2 + ...)) */
    vd ps = v_fmadd(z, v_fmadd(z, v_set1(S4), v_set1(S3)), v_set1(S2));
    ps = v_fmadd(v_mul(z, w), v_fmadd(z, v_set1(S6), v_set1(S5)), ps);
    vd sin_r = v_fmadd(v_mul(z, r), v_fmadd(z, ps, v_set1(S1)), r);
    /* cos(r) = (1 - z/2) + (((1 - (1 - z/2)) - z/2) + z*pc), the fdlibm split for accuracy */
    vd pc = v_mul(z, v_fmadd(z, v_fmadd(z, v_set1(C3), v_set1(C2)), v_set1(C1)));
    pc = v_fmadd(v_mul(w, w), v_fmadd(z, v_fmadd(z, v_set1(C6), v_set1(C5)), v_set1(C4)), pc);
    vd hz = v_mul(z, v_set1(0.5));
    vd one_minus_hz = v_sub(v_set1(1.0), hz);
    vd tail = v_fmadd(z, pc, v_sub(v_sub(v_set1(1.0), one_minus_hz), hz));
    vd cos_r = v_add(one_minus_hz, tail);

    /* quadrant q = k mod 4: bit 0 swaps sin and cos, bit 1 of q (of q+1) negates sin (cos) */
    vi q = v_bits(t);
    vi sign = vi_set1(INT64_MIN);
    vi swap = vi_shl(q, 63);
    vd s = v_select_sign(swap, cos_r, sin_r);
    vd c = v_select_sign(swap, sin_r, cos_r);
    *sin_out = v_xor_bits(s, vi_and(vi_shl(q, 62), sign));
    *cos_out = v_xor_bits(c, vi_and(vi_shl(vi_add(q, vi_set1(1)), 62), sign));
}

/* sin and cos of every lane of x; lanes beyond REDUCE_MAX (or NaN) take libm, lane by lane,
 * so a lane's result never depends on its neighbours (the vector width differs per path). */
static inline void v_sincos(vd x, vd *sin_out, vd *cos_out) {
    v_sincos_reduced(x, sin_out, cos_out);
    if (v_all_le(v_abs(x), v_set1(REDUCE_MAX)))
        return;
    double xs[VW], ss[VW], cs[VW];
    v_store(xs, x);
    v_store(ss, *sin_out);
    v_store(cs, *cos_out);
    for (int lane = 0; lane < VW; lane++) {
        if (!(fabs(xs[lane]) <= REDUCE_MAX)) {
            ss[lane] = sin(xs[lane]);
            cs[lane] = cos(xs[lane]);
        }
    }
    *sin_out = v_load(ss);
    *cos_out = v_load(cs);
}

#endif
