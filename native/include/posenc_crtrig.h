/* posenc_crtrig.h: amp * sin(p w) and amp * cos(p w), the product p w exact, rounded once into
 * float32, float16 or bfloat16, header-only C99. The exact path of the sin/cos kernels: taken for
 * the values whose float64 result cannot decide its rounding (kernels_body.h, "Correct rounding";
 * about 5e-6 of a table's values), so it is built for being right, not fast (~4 us a call).
 *
 *   double posenc_cr_sincos_rounded(double p, double w, double amp, int cosine, int format);
 *     format: PCT_FLOAT32, PCT_FLOAT16 or PCT_BFLOAT16; the rounded value, as a double.
 *
 * service/posenc/crmath/_trig.py is the Python twin (its docstring has the argument; k is found
 * here by float64 estimates, there by a division): Ziv's strategy in fixed point at S fraction
 * bits, S = 96, 192, 384, ... until both ends of the value's error interval round to the same
 * number. pi from Machin's formula; x = p w
 * (106 bits) reduced by k pi/2 at extra bits enough for any |x|; Taylor series for sin and cos of
 * the reduced angle; every truncation counted in the error bound. x == 0 is exact (sin 0 = 0,
 * cos 0 = 1: amp rounded, ties to even; a zero value is signed as amp, whatever the signs of p
 * and w: position -0.0 is position 0); non-finite inputs give NaN. Only exact operations come
 * from <math.h> (frexp, ldexp, fmod, nearbyint of an exact product's estimate: estimates only
 * choose k, the error bound does not depend on them). NAN if memory runs out. Link with -lm. */
#ifndef POSENC_CRTRIG_H
#define POSENC_CRTRIG_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "posenc_crmath.h"

enum { PCT_FLOAT32 = 0, PCT_FLOAT16 = 1, PCT_BFLOAT16 = 2 };

/* ---- unsigned fixed-width integers: n limbs of 32 bits, least significant first ------------
 * posenc_crmath.h's limb arithmetic (pcr_mp_*, whose numbers have f + 2 limbs) with f = n - 2,
 * and these for what it lacks: the top bit, products shifted by any number of bits, a 64-bit set. */

static inline long pct_top_bit(const uint32_t *a, int n) { /* -1 for zero */
    for (int i = n - 1; i >= 0; i--)
        if (a[i])
            for (int b = 31; b >= 0; b--)
                if ((a[i] >> b) & 1) return 32L * i + b;
    return -1;
}

/* r = (a * b) >> bits, truncated to n limbs; wide: 2n limbs of scratch. */
static inline void pct_mul_shift(uint32_t *r, const uint32_t *a, const uint32_t *b, long bits, int n, uint32_t *wide) {
    pcr_mp_mul_wide(wide, a, b, n - 2);
    long limbs = bits / 32, rest = bits % 32;
    for (int i = 0; i < n; i++) {
        long src = i + limbs;
        uint64_t cur = src < 2 * n ? wide[src] : 0, high = src + 1 < 2 * n ? wide[src + 1] : 0;
        r[i] = rest ? (uint32_t)((cur >> rest) | (high << (32 - rest))) : (uint32_t)cur;
    }
}

/* r = m (an integer below 2^64) * 2^shift, shift >= 0 */
static inline void pct_set_u64(uint32_t *r, uint64_t m, long shift, int n, uint32_t *tmp) {
    memset(r, 0, (size_t)n * 4);
    r[0] = (uint32_t)m;
    if (n > 1) r[1] = (uint32_t)(m >> 32);
    pcr_mp_shift_into(r, r, shift, n - 2, tmp);
}

/* The 53-bit integer significand of a finite double and its exponent: |v| = m 2^e. */
static inline uint64_t pct_split(double v, int *e) {
    int ex;
    double f = frexp(fabs(v), &ex);
    *e = ex - 53;
    return (uint64_t)ldexp(f, 53);
}

/* a 2^-bits as a double, approximately (sign not included): for choosing k only. */
static inline double pct_approx(const uint32_t *a, long bits, int n) {
    long top = pct_top_bit(a, n);
    if (top < 0) return 0.0;
    double v = 0;
    for (long i = top / 32; i >= 0 && i >= top / 32 - 2; i--) v += ldexp((double)a[i], (int)(32 * i - bits));
    return v;
}

/* ---- pi, reduction, series (_trig.py's pi_fixed, sin_cos_fixed, _series) ------------------ */

/* pos - neg += sign weight atan(1/x) 2^scale (two accumulators of magnitudes), each series term
 * truncated. */
static inline void pct_atan_inv(uint32_t *pos, uint32_t *neg, uint32_t x, uint32_t weight, int sign, long scale,
                                int n, uint32_t *power, uint32_t *term, uint32_t *tmp) {
    pct_set_u64(power, 1, scale, n, tmp);
    pcr_mp_div_u32(power, power, x, n - 2);
    for (uint32_t k = 1; !pcr_mp_is_zero(power, n - 2); k += 2) {
        pcr_mp_div_u32(term, power, k, n - 2);
        pcr_mp_mul_u32(term, term, weight, n - 2);
        pcr_mp_add(sign > 0 ? pos : neg, sign > 0 ? pos : neg, term, n - 2);
        pcr_mp_div_u32(power, power, x * x, n - 2);
        sign = -sign;
    }
}

/* pi 2^scale >> 1 into out (pi/2 within 1 unit at `scale` bits), as _trig.pi_fixed(scale) >> 1. */
static inline void pct_half_pi(uint32_t *out, long scale, int n, uint32_t *w) {
    uint32_t *pos = w, *neg = w + n, *power = w + 2 * n, *term = w + 3 * n, *tmp = w + 4 * n;
    memset(pos, 0, (size_t)(2 * n) * 4);
    pct_atan_inv(pos, neg, 5, 16, 1, scale + 24, n, power, term, tmp);
    pct_atan_inv(pos, neg, 239, 4, -1, scale + 24, n, power, term, tmp); /* Machin */
    pcr_mp_sub(out, pos, neg, n - 2);
    pcr_mp_shift_into(out, out, -25, n - 2, tmp);
}

/* sum of (-1)^j a^(2j+first) / (2j+first)! from its first term (a or 1), magnitudes only (a >= 0,
 * below 1: every term below the one before). Returns the steps; out >= 0. */
static inline int pct_series(uint32_t *out, const uint32_t *first_term, const uint32_t *a2, long bits, uint32_t first,
                             int n, uint32_t *w) {
    uint32_t *term = w, *neg = w + n, *wide = w + 2 * n;
    memcpy(term, first_term, (size_t)n * 4);
    memcpy(out, first_term, (size_t)n * 4);
    memset(neg, 0, (size_t)n * 4);
    int steps = 0;
    for (uint32_t k = first; !pcr_mp_is_zero(term, n - 2); k += 2, steps++) {
        pct_mul_shift(term, term, a2, bits, n, wide);
        pcr_mp_div_u32(term, term, (k + 1) * (k + 2), n - 2);
        pcr_mp_add(steps % 2 ? out : neg, steps % 2 ? out : neg, term, n - 2);
    }
    pcr_mp_sub(out, out, neg, n - 2);
    return steps;
}

/* |v| 2^exp2 rounded to `fbits` significant bits, least normal exponent emin, overflow at 2^emax:
 * nearest, ties to even (v > 0). */
static inline double pct_round(const uint32_t *v, long exp2, int fbits, int emin, int emax, int n) {
    long top = pct_top_bit(v, n);
    long e = top + exp2, spacing = (e > emin ? e : emin) - (fbits - 1), drop = spacing - exp2;
    uint64_t whole = 0;
    if (drop <= 0) {
        for (long b = top; b >= 0; b--) whole = (whole << 1) | ((v[b / 32] >> (b % 32)) & 1);
        return ldexp((double)whole, (int)exp2);
    }
    for (long b = top; b >= drop; b--) whole = (whole << 1) | ((v[b / 32] >> (b % 32)) & 1);
    int round = (int)((v[(drop - 1) / 32] >> ((drop - 1) % 32)) & 1), sticky = 0;
    for (long b = 0; b < drop - 1 && !sticky; b++) sticky = (v[b / 32] >> (b % 32)) & 1;
    if (round && (sticky || (whole & 1))) whole++;
    int len = 0;
    for (uint64_t t = whole; t; t >>= 1) len++;
    if (len + spacing > emax) return HUGE_VAL;
    return ldexp((double)whole, (int)spacing);
}

/* One Ziv step at `bits` fraction bits: 1 and *out when the value's interval rounds one way. */
static inline int pct_attempt(double p, double w, double amp, int cosine, int fbits, int emin, int emax, long bits,
                              double *out) {
    int ep, ew, ea;
    uint64_t mp = pct_split(p, &ep), mw = pct_split(w, &ew), ma = pct_split(amp, &ea);
    int ex = ep + ew + 106; /* |p w| < 2^ex */
    long extra = (ex > 0 ? ex : 0) + 10, scale = bits + extra;
    int n = (int)((scale + (ex > 0 ? ex : 0) + 64 + 64) / 32) + 2;
    uint32_t *w_ = (uint32_t *)calloc((size_t)(14 * n), 4);
    if (!w_) return -1;
    uint32_t *angle = w_, *half_pi = w_ + n, *t = w_ + 2 * n, *tmp = w_ + 3 * n, *a2 = w_ + 4 * n;
    uint32_t *s = w_ + 5 * n, *c = w_ + 6 * n, *one = w_ + 7 * n, *work = w_ + 8 * n;
    /* angle = |p w| 2^scale, truncated: mp mw = (mp_hi 2^32 + mp_lo) mw */
    pct_set_u64(angle, mw, 0, n, tmp);
    pcr_mp_mul_u32(t, angle, (uint32_t)(mp >> 32), n - 2);
    pcr_mp_shift_into(t, t, 32, n - 2, tmp);
    pcr_mp_mul_u32(angle, angle, (uint32_t)mp, n - 2);
    pcr_mp_add(angle, angle, t, n - 2);
    pcr_mp_shift_into(angle, angle, scale + ep + ew, n - 2, tmp);
    pct_half_pi(half_pi, scale, n, work);
    /* r = angle - k pi/2, k chosen by estimates in steps of up to 2^50 (each exact: k is a double
     * holding an integer), its sign kept apart; q = k mod 4 */
    int negative = 0, q = 0;
    for (;;) {
        double r_est = pct_approx(angle, scale, n) * (negative ? -1.0 : 1.0);
        if (fabs(r_est) < 0.8) break;
        double k = nearbyint(r_est * 0.63661977236758134);
        q = (q + (int)fmod(k, 4.0) + 4) & 3;
        int ek;
        uint64_t mk = pct_split(k, &ek); /* |k| = mk 2^ek, ek >= 0 for |k| >= 2^53 */
        pcr_mp_mul_u32(t, half_pi, (uint32_t)(mk >> 32), n - 2);
        pcr_mp_shift_into(t, t, 32, n - 2, tmp);
        pcr_mp_mul_u32(tmp, half_pi, (uint32_t)mk, n - 2);
        pcr_mp_add(t, t, tmp, n - 2);
        pcr_mp_shift_into(t, t, ek, n - 2, tmp);
        if ((k < 0) != negative) { /* same direction: |r| grows (never taken by round-to-nearest k) */
            pcr_mp_add(angle, angle, t, n - 2);
        } else if (pcr_mp_cmp(angle, t, n - 2) >= 0) {
            pcr_mp_sub(angle, angle, t, n - 2);
        } else {
            pcr_mp_sub(angle, t, angle, n - 2);
            negative = !negative;
        }
    }
    pcr_mp_shift_into(angle, angle, -extra, n - 2, tmp); /* |r| at `bits` bits */
    pct_mul_shift(a2, angle, angle, bits, n, work);
    pct_set_u64(one, 1, bits, n, tmp);
    int steps_s = pct_series(s, angle, a2, bits, 1, n, work);
    int steps_c = pct_series(c, one, a2, bits, 0, n, work);
    /* sin a, cos a from the quadrant: ((s,c), (c,-s), (-s,-c), (-c,s))[q] with sin r = -s when r < 0 */
    int s_neg = negative;
    const uint32_t *mag;
    int value_neg;
    if (!cosine) {
        mag = (q & 1) ? c : s;
        value_neg = (q & 1) ? (q == 3) : ((q == 2) != s_neg);
    } else {
        mag = (q & 1) ? s : c;
        value_neg = (q & 1) ? ((q == 1) != s_neg) : (q == 2);
    }
    if (signbit(p) != signbit(w) && !cosine) value_neg = !value_neg; /* sin(-x) = -sin x */
    if (signbit(amp)) value_neg = !value_neg;
    uint32_t u = (uint32_t)(2 * (steps_s > steps_c ? steps_s : steps_c) + 4);
    /* amp * [mag - u, mag + u]: both ends rounded */
    int ok = 0;
    memset(t, 0, (size_t)n * 4);
    t[0] = u;
    if (pcr_mp_cmp(mag, t, n - 2) > 0) {
        uint32_t *low = a2, *high = one;
        pcr_mp_sub(low, mag, t, n - 2);
        pcr_mp_add(high, mag, t, n - 2);
        double ends[2];
        uint32_t *v[2] = {low, high};
        for (int i = 0; i < 2; i++) { /* v * ma, ma < 2^53: two 32-bit pieces */
            pcr_mp_mul_u32(tmp, v[i], (uint32_t)(ma >> 32), n - 2);
            pcr_mp_shift_into(tmp, tmp, 32, n - 2, work);
            pcr_mp_mul_u32(s, v[i], (uint32_t)ma, n - 2);
            pcr_mp_add(s, s, tmp, n - 2);
            ends[i] = pct_round(s, (long)ea - bits, fbits, emin, emax, n);
        }
        if (ends[0] == ends[1]) {
            *out = value_neg ? -ends[0] : ends[0];
            ok = 1;
        }
    }
    free(w_);
    return ok;
}

static inline double posenc_cr_sincos_rounded(double p, double w, double amp, int cosine, int format) {
    static const int formats[3][3] = {{24, -126, 128}, {11, -14, 16}, {8, -126, 128}};
    const int *f = formats[format == PCT_FLOAT16 ? 1 : format == PCT_BFLOAT16 ? 2 : 0];
    if (!isfinite(p) || !isfinite(w) || !isfinite(amp)) return NAN;
    if (p == 0 || w == 0 || amp == 0) {
        if (!cosine || amp == 0) /* sin 0 = 0, or amp = 0: a zero signed as amp (position -0.0 is 0) */
            return copysign(0.0, amp);
        int ea;
        uint64_t ma = pct_split(amp, &ea);
        uint32_t v[4] = {(uint32_t)ma, (uint32_t)(ma >> 32), 0, 0};
        double r = pct_round(v, ea, f[0], f[1], f[2], 4);
        return amp < 0 ? -r : r;
    }
    for (long bits = 96;; bits *= 2) {
        double out;
        int rc = pct_attempt(p, w, amp, cosine, f[0], f[1], f[2], bits, &out);
        if (rc < 0) return NAN;
        if (rc) return out;
    }
}

#endif
