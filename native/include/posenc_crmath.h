/* posenc_crmath.h: correctly rounded pow, exp and log (double), and pow and log rounded once to
 * float32, header-only C99. The same numbers as posenc.crmath in Python and as mpmath rounded once,
 * on every CPU and C library: the frequencies posenc computes (1/base^(2i/d), t2t timescales,
 * ALiBi slopes) and its kernels' xPos decay and T5 logs come from these, never from libm's pow,
 * exp or log (glibc picks another pow on x86 CPUs without FMA: 1 ulp apart at pow(500000, 0.484375)).
 *
 *   double posenc_cr_pow(double x, double y);  double posenc_cr_exp(double x);
 *   double posenc_cr_log(double x);            float posenc_cr_powf(float x, float y);
 *   float posenc_cr_logf(float x);
 *
 * Special values as C99 Annex F (pow(x, 0) = 1, pow(-8, 1/3) = NaN, log(0) = -inf, ...); errno is
 * not set. The algorithm is service/posenc/crmath/_fast.py's, step for step, on the same tables
 * (posenc_crmath_tables.h, generated with the Python ones):
 *
 * - fast path: log in double-double (x = 2^e m, m c_i = 1 + t exactly, a degree-11 series in
 *   t, |t| <= 2^-8: relative error < 2^-80), z = y log x as a double-double, exp(z) by
 *   2^(k/2^14) tables and a degree-6 polynomial (< 2^-90 for an exact z); a rounding test then
 *   proves the double (or float32) nearest to every value within the error bound is one number.
 * - accurate path, when it cannot (about once in 2^25 calls, and subnormal results): Ziv's
 *   strategy in fixed point with 32-bit limbs at 320 bits, doubling until the interval rounds
 *   one way; ln 2 and exp by series with every truncation counted, log by one correction
 *   log x = y0 + log1p(x e^-y0 - 1) from the fast path's y0. exp and log of a double never
 *   land on a rounding boundary (Lindemann); whether x^y is a midpoint is decided exactly with
 *   integers (pcr_is_power), so the loop ends.
 *
 * Only exact operations come from <math.h>: fma where the target has the instruction
 * (FP_FAST_FMA; elsewhere exact products come from Dekker's algorithm, which nothing can contract),
 * frexp, ldexp, floor, sqrt (IEEE correctly rounded). A compiler that contracts a*b+c into an fma
 * keeps every bound here (one rounding fewer), but double arithmetic must be double
 * (FLT_EVAL_METHOD 0: x86-64 SSE2, aarch64). Link with -lm. */
#ifndef POSENC_CRMATH_H
#define POSENC_CRMATH_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "posenc_crmath_tables.h"

#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
#error "posenc_crmath.h needs double expressions evaluated in double (FLT_EVAL_METHOD 0)"
#endif

#define PCR_LOG_ERR 0x1p-80
#define PCR_LOG_D_ERR 0x1p-40
#define PCR_EXP_ERR 0x1p-90
#define PCR_Z_ERR (0x1p-80 + 0x1p-100)
#define PCR_EXP_OVERFLOW 709.79
#define PCR_EXP_UNDERFLOW (-745.2)

/* ---- fast path: double-double (posenc/crmath/_fast.py) ------------------------------------ */

static inline void pcr_two_sum(double a, double b, double *s, double *e) {
    double sum = a + b, bb = sum - a;
    *s = sum;
    *e = (a - (sum - bb)) + (b - bb);
}

static inline void pcr_fast_two_sum(double a, double b, double *s, double *e) { /* |a| >= |b| or a == 0 */
    double sum = a + b;
    *s = sum;
    *e = b - (sum - a);
}

/* a * b = p + e exactly: one fused multiply-add where the target has one (FP_FAST_FMA: an
 * instruction, not a call), else Dekker's product with Veltkamp's split, which is exact and which
 * a compiler cannot contract into an FMA the target lacks. Both give the same p and e. */
static inline void pcr_two_prod(double a, double b, double *p, double *e) {
    double prod = a * b;
    *p = prod;
#ifdef FP_FAST_FMA
    *e = fma(a, b, -prod);
#else
    double t = 134217729.0 * a, ah = t - (t - a), al = a - ah;
    t = 134217729.0 * b;
    double bh = t - (t - b), bl = b - bh;
    *e = ((ah * bh - prod) + ah * bl + al * bh) + al * bl;
#endif
}

static inline uint64_t pcr_bits(double x) {
    uint64_t u;
    memcpy(&u, &x, 8);
    return u;
}

static inline double pcr_from_bits(uint64_t u) {
    double x;
    memcpy(&x, &u, 8);
    return x;
}

/* 2^e for a normal result (-1022 <= e <= 1023), from its bits. */
static inline double pcr_pow2(int e) { return pcr_from_bits((uint64_t)(e + 1023) << 52); }

/* log(x), finite x > 0, as hi + lo within PCR_LOG_ERR * |hi| (_fast.log_dd). */
static inline void pcr_log_dd(double x, double *hi_out, double *lo_out) {
    uint64_t u = pcr_bits(x);
    int e = -1023;
    if (u >> 52 == 0) { /* subnormal: scale by 2^54 first */
        u = pcr_bits(x * 0x1p54);
        e -= 54;
    }
    e += (int)(u >> 52);
    double m = pcr_from_bits((u & 0xfffffffffffffULL) | 0x3ff0000000000000ULL); /* x = 2^e m, m in [1, 2) */
    int i = (int)((m - 1.0) * 128.0 + 0.5);
    if (i >= PCR_LOG_SPLIT) e += 1;
    double ph, pl, th, tl, sh, sl, bh, bl, ch, cl, wh, wl, gh, gl, hh, hl, hi, lo;
    pcr_two_prod(m, PCR_LOG_C[i], &ph, &pl);
    pcr_fast_two_sum(ph - 1.0, pl, &th, &tl);
    pcr_two_prod(th, th, &sh, &sl);
    const double *G = PCR_LOG_G;
    double g = G[0] + th * (G[1] + th * (G[2] + th * (G[3] + th * (G[4] + th * (G[5] + th * G[6])))));
    pcr_fast_two_sum(PCR_THIRD[0], -0.25 * th, &bh, &bl);
    bl += PCR_THIRD[1] + sh * g;
    pcr_two_prod(sh, th, &ch, &cl);
    cl += sl * th;
    pcr_two_prod(ch, bh, &ph, &pl);
    pl += ch * bl + cl * bh;
    pcr_two_sum(-0.5 * sh, ph, &wh, &wl);
    wl += pl - 0.5 * sl;
    pcr_fast_two_sum(th, wh, &gh, &gl);
    gl += wl + tl / (1.0 + th);
    double ah = e * PCR_LN2_H, al = e * PCR_LN2_L;
    pcr_fast_two_sum(ah, PCR_LOG_T[i][0], &hh, &hl);
    pcr_two_sum(hh, gh, &hi, &lo);
    lo += hl + al + PCR_LOG_T[i][1] + gl;
    pcr_fast_two_sum(hi, lo, hi_out, lo_out);
}

/* log(x), finite x > 0, in plain double within PCR_LOG_D_ERR (_fast.log_d): a float32 log's first try. */
static inline double pcr_log_d(double x) {
    uint64_t u = pcr_bits(x);
    int e = -1023;
    if (u >> 52 == 0) {
        u = pcr_bits(x * 0x1p54);
        e -= 54;
    }
    e += (int)(u >> 52);
    double m = pcr_from_bits((u & 0xfffffffffffffULL) | 0x3ff0000000000000ULL);
    int i = (int)((m - 1.0) * 128.0 + 0.5);
    if (i >= PCR_LOG_SPLIT) e += 1;
    double t = m * PCR_LOG_C[i] - 1.0, t2 = t * t;
    double q = (0.5 - t * (1.0 / 3)) + t2 * ((0.25 - t * 0.2) + t2 * (1.0 / 6 - t * (1.0 / 7)));
    return (e * PCR_LN2_H + PCR_LOG_T[i][0]) + (t - t2 * q + e * PCR_LN2_L);
}

/* exp(zh + zl) = 2^q (hi + lo), hi in [0.99, 2), within PCR_EXP_ERR (_fast.exp_dd);
 * PCR_EXP_UNDERFLOW <= zh <= PCR_EXP_OVERFLOW. */
static inline void pcr_exp_dd(double zh, double zl, double *hi_out, double *lo_out, int *q) {
    double kf = zh * PCR_EXP_INV;
    int64_t k = kf >= 0 ? (int64_t)(kf + 0.5) : -(int64_t)(0.5 - kf);
    double kd = (double)k, rh, rl, sh, sl, eh, el, vh, vl, ph, pl, hi, lo;
    pcr_two_sum(zh - kd * PCR_EXP_C_H, -(kd * PCR_EXP_C_M), &rh, &rl);
    pcr_two_sum(rh, rl + (zl - kd * PCR_EXP_C_L), &rh, &rl);
    pcr_two_prod(rh, rh, &sh, &sl);
    sl += 2.0 * rh * rl;
    double q6 = rh * sh * (1.0 / 6 + rh * (1.0 / 24 + rh * (1.0 / 120 + rh * (1.0 / 720))));
    pcr_fast_two_sum(rh, 0.5 * sh, &eh, &el);
    el += rl + 0.5 * sl + q6;
    pcr_fast_two_sum(1.0, eh, &vh, &vl);
    vl += el;
    int64_t kk = k + ((int64_t)1 << 30);
    const double *t1 = PCR_EXP_T1[(kk >> 7) & 127], *t2 = PCR_EXP_T2[kk & 127];
    pcr_two_prod(t1[0], t2[0], &ph, &pl);
    pl += t1[0] * t2[1] + t1[1] * t2[0];
    pcr_two_prod(ph, vh, &hi, &lo);
    lo += ph * vl + pl * vh;
    pcr_fast_two_sum(hi, lo, hi_out, lo_out);
    *q = (int)((kk >> 14) - ((int64_t)1 << 16));
}

/* hi + lo rounded to `bits` (53 or 24) bits in *r; 1 when everything within err of hi + lo rounds
 * to it (_fast.round_checked). hi > 0. */
/* (up, down): half the gaps from r > 0 to its neighbours at `bits` bits (_fast.half_gaps). */
static inline void pcr_half_gaps(double r, int bits, double *up, double *down) {
    uint64_t u = pcr_bits(r); /* r in [2^E, 2^(E+1)): half the gap above is 2^(E - bits), below a power of 2 half that */
    *up = pcr_pow2((int)(u >> 52) - 1023 - bits);
    *down = (u & 0xfffffffffffffULL) == 0 ? 0.5 * *up : *up;
}

static inline int pcr_round_checked(double hi, double lo, double err, int bits, double *r_out) {
    double r = hi + lo, s, t, up, down;
    if (bits < 53) {
        r = (double)(float)r; /* to nearest, ties to even, at 24 bits (r in float's normal range) */
        pcr_two_sum(hi - r, lo, &s, &t);
        pcr_half_gaps(r, bits, &up, &down);
        if (s >= up) r += 2.0 * up; /* hi + lo rounded to a float32 midpoint, and that the wrong way */
        else if (-s >= down) r -= 2.0 * down;
    }
    pcr_two_sum(hi - r, lo, &s, &t);
    pcr_half_gaps(r, bits, &up, &down);
    *r_out = r;
    if (s >= 0) return fabs(s) * (1.0 + 0x1p-50) + err < up && err < down;
    return fabs(s) * (1.0 + 0x1p-50) + err < down;
}

/* 2^q r, 0 (not proven) where it would be subnormal in the format (_fast.scaled_result). */
static inline int pcr_scaled(double r, int q, int bits, double *out) {
    int e = (int)(pcr_bits(r) >> 52) - 1023 + q; /* 2^q r in [2^e, 2^(e+1)) */
    if (e > (bits == 53 ? 1023 : 127)) {
        *out = HUGE_VAL;
        return 1;
    }
    if (e < (bits == 53 ? -1022 : -126)) return 0;
    *out = q < -1000 ? (r * 0x1p-100) * pcr_pow2(q + 100) : q > 1000 ? (r * 0x1p100) * pcr_pow2(q - 100) : r * pcr_pow2(q);
    return 1;
}

static inline int pcr_exp_checked(double zh, double zl, double err, int bits, double *out) {
    if (zh > PCR_EXP_OVERFLOW) {
        *out = HUGE_VAL;
        return 1;
    }
    if (zh < PCR_EXP_UNDERFLOW) {
        *out = 0.0;
        return 1;
    }
    double hi, lo, r;
    int q;
    pcr_exp_dd(zh, zl, &hi, &lo, &q);
    if (!pcr_round_checked(hi, lo, hi * err, bits, &r)) return 0;
    return pcr_scaled(r, q, bits, out);
}

/* x^y from log_dd(x) = lh + ll (_fast.pow_from_log). */
static inline int pcr_pow_from_log(double lh, double ll, double y, int bits, double *out) {
    double zh, zl;
    pcr_two_prod(y, lh, &zh, &zl);
    zl += y * ll;
    return pcr_exp_checked(zh, zl, PCR_EXP_ERR + 1.01 * fabs(zh) * PCR_Z_ERR + 0x1p-1000, bits, out);
}

static inline int pcr_pow_fast(double x, double y, int bits, double *out) {
    double lh, ll;
    pcr_log_dd(x, &lh, &ll);
    return pcr_pow_from_log(lh, ll, y, bits, out);
}

static inline int pcr_log_fast(double x, int bits, double *out) {
    double hi, lo, r;
    if (bits < 53) {
        double v = pcr_log_d(x);
        if (pcr_round_checked(fabs(v), 0.0, fabs(v) * PCR_LOG_D_ERR, bits, &r)) {
            *out = v > 0 ? r : -r;
            return 1;
        }
    }
    pcr_log_dd(x, &hi, &lo);
    int ok = pcr_round_checked(fabs(hi), hi > 0 ? lo : -lo, fabs(hi) * PCR_LOG_ERR, bits, &r);
    *out = hi > 0 ? r : -r;
    return ok;
}

/* ---- accurate path: Ziv's strategy in fixed point --------------------------------------------
 * A number is f fraction limbs and 2 integer limbs of 32 bits, least significant first:
 * value = sum d[i] 2^(32 (i - f)). Operations truncate (an error under one unit, 2^-32f); each
 * function returns a bound on its result's error in units, as a double computed upward. */

#define PCR_LIMBS(f) ((size_t)(f) + 2)

static inline void pcr_mp_set(uint32_t *r, int f, uint32_t integer) {
    memset(r, 0, PCR_LIMBS(f) * 4);
    r[f] = integer;
}

static inline int pcr_mp_cmp(const uint32_t *a, const uint32_t *b, int f) {
    for (int i = f + 1; i >= 0; i--)
        if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
    return 0;
}

static inline int pcr_mp_is_zero(const uint32_t *a, int f) {
    for (int i = 0; i <= f + 1; i++)
        if (a[i]) return 0;
    return 1;
}

static inline void pcr_mp_add(uint32_t *r, const uint32_t *a, const uint32_t *b, int f) {
    uint64_t carry = 0;
    for (int i = 0; i <= f + 1; i++) {
        carry += (uint64_t)a[i] + b[i];
        r[i] = (uint32_t)carry;
        carry >>= 32;
    }
}

static inline void pcr_mp_sub(uint32_t *r, const uint32_t *a, const uint32_t *b, int f) { /* a >= b */
    int64_t borrow = 0;
    for (int i = 0; i <= f + 1; i++) {
        int64_t d = (int64_t)a[i] - b[i] - borrow;
        borrow = d < 0;
        r[i] = (uint32_t)(d + (borrow << 32));
    }
}

static inline void pcr_mp_from_double(uint32_t *r, double v, int f);

/* r = a +- u units (u >= 0, rounded up to a whole unit); 0 if a - u would be negative. */
static inline int pcr_mp_add_units(uint32_t *r, const uint32_t *a, double u, int negative, int f) {
    double scaled = ldexp(u, -32 * f);
    if (!(scaled < 1.0)) return 0; /* an error of 1 or more: nothing to decide at this precision */
    uint32_t *v = (uint32_t *)calloc(PCR_LIMBS(f), 4);
    if (!v) return 0;
    pcr_mp_from_double(v, scaled, f); /* truncated: one unit more */
    for (int i = 0; i <= f + 1 && ++v[i] == 0; i++) continue;
    int ok = 1;
    if (!negative) {
        pcr_mp_add(r, a, v, f);
    } else if (pcr_mp_cmp(a, v, f) >= 0) {
        pcr_mp_sub(r, a, v, f);
    } else {
        ok = 0;
    }
    free(v);
    return ok;
}

/* wide (2 (f + 2) limbs) = a * b, every limb of the product (a schoolbook product of integers). */
static inline void pcr_mp_mul_wide(uint32_t *wide, const uint32_t *a, const uint32_t *b, int f) {
    int n = f + 2;
    memset(wide, 0, (size_t)(2 * n) * 4);
    for (int i = 0; i < n; i++) {
        if (!a[i]) continue;
        uint64_t carry = 0;
        for (int j = 0; j < n; j++) {
            carry += (uint64_t)a[i] * b[j] + wide[i + j];
            wide[i + j] = (uint32_t)carry;
            carry >>= 32;
        }
        wide[i + n] = (uint32_t)carry;
    }
}

/* r = a * b, both under 2^32 in their integer part and the product too; tmp: 2 (f + 2) limbs. */
static inline void pcr_mp_mul(uint32_t *r, const uint32_t *a, const uint32_t *b, int f, uint32_t *tmp) {
    pcr_mp_mul_wide(tmp, a, b, f);
    memcpy(r, tmp + f, PCR_LIMBS(f) * 4);
}

/* r = a * u (exact; the product must fit the integer limbs). */
static inline void pcr_mp_mul_u32(uint32_t *r, const uint32_t *a, uint32_t u, int f) {
    uint64_t carry = 0;
    for (int i = 0; i <= f + 1; i++) {
        carry += (uint64_t)a[i] * u;
        r[i] = (uint32_t)carry;
        carry >>= 32;
    }
}

static inline void pcr_mp_div_u32(uint32_t *r, const uint32_t *a, uint32_t u, int f) {
    uint64_t rem = 0;
    for (int i = f + 1; i >= 0; i--) {
        uint64_t cur = (rem << 32) | a[i];
        r[i] = (uint32_t)(cur / u);
        rem = cur % u;
    }
}

/* r = a * 2^bits (bits < 0: truncating right shift); bits shifted past the top are lost. r may be
 * a; tmp: f + 2 limbs of scratch (posenc_crtrig.h passes its own). */
static inline void pcr_mp_shift_into(uint32_t *r, const uint32_t *a, long bits, int f, uint32_t *tmp) {
    long n = f + 2, limbs = bits >= 0 ? bits / 32 : -((-bits + 31) / 32), rest = bits - limbs * 32;
    for (long i = 0; i < n; i++) { /* tmp = a shifted by whole limbs, then by rest (0..31) bits left */
        long src = i - limbs;
        uint64_t cur = (src >= 0 && src < n) ? a[src] : 0, low = (src - 1 >= 0 && src - 1 < n) ? a[src - 1] : 0;
        tmp[i] = rest ? (uint32_t)((cur << rest) | (low >> (32 - rest))) : (uint32_t)cur;
    }
    memcpy(r, tmp, (size_t)n * 4);
}

/* pcr_mp_shift_into with scratch of its own. */
static inline void pcr_mp_shift(uint32_t *r, const uint32_t *a, long bits, int f) {
    uint32_t *tmp = (uint32_t *)calloc(PCR_LIMBS(f), 4);
    if (!tmp) return;
    pcr_mp_shift_into(r, a, bits, f, tmp);
    free(tmp);
}

/* r = the double v (|v| < 2^64), truncated to the fixed point. */
static inline void pcr_mp_from_double(uint32_t *r, double v, int f) {
    int e;
    uint64_t m = (uint64_t)ldexp(frexp(fabs(v), &e), 53);
    memset(r, 0, PCR_LIMBS(f) * 4);
    r[0] = (uint32_t)m;
    r[1] = (uint32_t)(m >> 32);
    pcr_mp_shift(r, r, (long)e - 53 + 32L * f, f);
}

static inline double pcr_mp_to_double(const uint32_t *a, int f) { /* approximate, for choosing k */
    double v = 0;
    for (int i = f + 1; i >= 0 && i >= f - 2; i--) v += ldexp((double)a[i], 32 * (i - f));
    return v;
}

/* ln 2 = sum 2 / ((2j + 1) 3^(2j+1)); returns the error bound. */
static inline double pcr_mp_ln2(uint32_t *sum, int f, uint32_t *term, uint32_t *tmp) {
    pcr_mp_set(term, f, 2);
    pcr_mp_div_u32(term, term, 3, f);
    memcpy(sum, term, PCR_LIMBS(f) * 4);
    double terms = 1;
    for (uint32_t j = 1; !pcr_mp_is_zero(term, f); j++, terms++) {
        pcr_mp_div_u32(term, term, 9, f);
        pcr_mp_div_u32(tmp, term, 2 * j + 1, f);
        pcr_mp_add(sum, sum, tmp, f);
    }
    return 3 * terms + 3;
}

/* exp(+-z) = 2^K S, S in [1, 2], for z >= 0 under 2^12 known within z_err units; returns S's error. */
static inline double pcr_mp_exp(uint32_t *s, int *K, const uint32_t *z, int negative, double z_err, const uint32_t *ln2,
                         double ln2_err, int f, uint32_t *w) {
    size_t n = PCR_LIMBS(f);
    uint32_t *r = w, *term = w + n, *tmp = w + 2 * n, *prod = w + 3 * n;
    long k = (long)(pcr_mp_to_double(z, f) / 0.6931471805599453);
    for (;;) { /* r = z - k ln2 in [0, ln2) */
        pcr_mp_mul_u32(tmp, ln2, (uint32_t)k, f);
        if (pcr_mp_cmp(tmp, z, f) > 0) {
            k--;
            continue;
        }
        pcr_mp_sub(r, z, tmp, f);
        if (pcr_mp_cmp(r, ln2, f) >= 0) {
            k++;
            continue;
        }
        break;
    }
    double r_err = z_err + (double)k * ln2_err;
    *K = (int)k;
    if (negative && !pcr_mp_is_zero(r, f)) { /* exp(-z) = 2^(-k-1) exp(ln2 - r) */
        pcr_mp_sub(r, ln2, r, f);
        r_err += ln2_err;
        *K = -(int)k - 1;
    } else if (negative) {
        *K = -(int)k;
    }
    pcr_mp_set(s, f, 1);
    pcr_mp_set(term, f, 1);
    double terms = 0;
    for (uint32_t j = 1; !pcr_mp_is_zero(term, f); j++, terms++) {
        pcr_mp_mul(term, term, r, f, prod);
        pcr_mp_div_u32(term, term, j, f);
        pcr_mp_add(s, s, term, f);
    }
    return (2 * r_err + 4 * terms + 8) * (1 + 0x1p-40);
}

/* |log x| in out, its sign in *negative, x > 0 finite: log x = y0 + log1p(x e^-y0 - 1) with y0 the
 * fast path's value; returns the error bound. w: 8 (f + 2) limbs. */
static inline double pcr_mp_log(uint32_t *out, int *negative, double x, const uint32_t *ln2, double ln2_err, int f,
                         uint32_t *w) {
    size_t n = PCR_LIMBS(f);
    uint32_t *y0 = w, *s = w + n, *u = w + 2 * n, *p = w + 3 * n, *pos = w + 4 * n, *neg = w + 5 * n,
             *tmp = w + 6 * n, *ew = w + 7 * n;
    double hi, lo;
    pcr_log_dd(x, &hi, &lo);
    pcr_mp_from_double(y0, fabs(hi), f); /* y0 = |hi|: any y0 makes the identity exact */
    int y0_negative = hi < 0, K, e;
    double s_err = pcr_mp_exp(s, &K, y0, !y0_negative, 0, ln2, ln2_err, f, ew); /* s 2^K = e^-y0 */
    uint64_t m = (uint64_t)ldexp(frexp(x, &e), 53); /* x = m 2^(e-53) */
    pcr_mp_mul_u32(tmp, s, (uint32_t)(m >> 32), f);  /* s m exactly: s < 2, m < 2^53 */
    pcr_mp_shift(tmp, tmp, 32, f);
    pcr_mp_mul_u32(p, s, (uint32_t)m, f);
    pcr_mp_add(p, p, tmp, f);
    pcr_mp_shift(p, p, (long)e - 53 + K, f); /* p = x e^-y0 in [0.5, 2]: s's error times p / s <= 1 */
    double p_err = s_err + 2;
    pcr_mp_set(tmp, f, 1);
    int delta_negative = pcr_mp_cmp(p, tmp, f) < 0;
    if (delta_negative) pcr_mp_sub(u, tmp, p, f);
    else pcr_mp_sub(u, p, tmp, f); /* u = |x e^-y0 - 1| */
    memcpy(pos, u, n * 4);
    pcr_mp_set(neg, f, 0);
    memcpy(p, u, n * 4);
    double terms = 1;
    for (uint32_t k = 2; !pcr_mp_is_zero(p, f); k++, terms++) { /* log1p(+-u) = +-u - u^2/2 +- u^3/3 ... */
        pcr_mp_mul(p, p, u, f, ew);
        pcr_mp_div_u32(tmp, p, k, f);
        pcr_mp_add((k % 2 == 0 && !delta_negative) ? neg : pos, (k % 2 == 0 && !delta_negative) ? neg : pos, tmp, f);
    }
    /* log x = (y0 sign) y0 + (delta sign) (pos - neg) */
    pcr_mp_sub(pos, pos, neg, f);
    int l_negative = delta_negative;
    if (y0_negative == l_negative) {
        pcr_mp_add(out, y0, pos, f);
        *negative = y0_negative;
    } else if (pcr_mp_cmp(y0, pos, f) >= 0) {
        pcr_mp_sub(out, y0, pos, f);
        *negative = y0_negative;
    } else {
        pcr_mp_sub(out, pos, y0, f);
        *negative = l_negative;
    }
    return (p_err * 1.01 + 3 * terms + 3) * (1 + 0x1p-40);
}

/* The bits of a from bit index `at` (0 = lowest bit of limb 0) up, as an integer of `count` <= 63
 * bits; bits outside a are 0. */
static inline uint64_t pcr_mp_bits(const uint32_t *a, int f, long at, int count) {
    uint64_t v = 0;
    for (int b = count - 1; b >= 0; b--) {
        long i = at + b;
        int bit = (i >= 0 && i < 32L * (f + 2)) ? (a[i / 32] >> (i % 32)) & 1 : 0;
        v = (v << 1) | (uint64_t)bit;
    }
    return v;
}

static inline int pcr_mp_any_below(const uint32_t *a, long at) {
    for (long i = 0; i < at; i++)
        if ((a[i / 32] >> (i % 32)) & 1) return 1;
    return 0;
}

/* a 2^K (a > 0) rounded to `bits` bits with the format's subnormals: *n 2^*lsb (n < 2^(bits + 1)). */
static inline void pcr_mp_round(const uint32_t *a, int f, long K, int bits, uint64_t *n, long *lsb) {
    long top = 32L * (f + 2) - 1;
    while (top > 0 && !((a[top / 32] >> (top % 32)) & 1)) top--;
    long e = top - 32L * f + K, emin = bits == 53 ? -1022 : -126;
    *lsb = (e > emin ? e : emin) - (bits - 1);
    long at = *lsb - K + 32L * f; /* bit index of the weight 2^lsb */
    uint64_t v = pcr_mp_bits(a, f, at, bits + 1);
    int round = (int)pcr_mp_bits(a, f, at - 1, 1), sticky = at - 1 > 0 && pcr_mp_any_below(a, at - 1);
    if (round && (sticky || (v & 1))) v++;
    *n = v;
}

static inline double pcr_value(uint64_t n, long lsb, int bits) {
    long limit = bits == 53 ? 1024 : 128;
    int len = 0;
    for (uint64_t t = n; t; t >>= 1) len++;
    if (n && len + lsb > limit) return HUGE_VAL;
    return ldexp((double)n, (int)lsb);
}

static inline uint64_t pcr_isqrt(uint64_t a) {
    uint64_t r = (uint64_t)sqrt((double)a);
    while (r * r > a) r--;
    while ((r + 1) * (r + 1) <= a) r++;
    return r;
}

/* Whether x^y == b 2^F exactly (b odd >= 3), x > 0: as _exact.is_power. */
static inline int pcr_is_power(double x, double y, uint64_t b, long F, int bits) {
    int ex, ey;
    uint64_t a = (uint64_t)ldexp(frexp(x, &ex), 53), yi = (uint64_t)ldexp(frexp(fabs(y), &ey), 53);
    long E = ex - 53, k = -(ey - 53);
    if (y <= 0) return 0;
    while (!(a & 1)) a >>= 1, E++;
    while (!(yi & 1)) yi >>= 1, k--;
    if (k < 0) { /* y an integer: yi 2^-k */
        if (-k > 6) return 0;
        yi <<= -k;
        k = 0;
    }
    if (k > 6) return 0;
    uint64_t c = a;
    for (long i = 0; i < k; i++) {
        uint64_t r = pcr_isqrt(c);
        if (r * r != c) return 0;
        c = r;
    }
    int c_bits = 0;
    for (uint64_t t = c; t > 1; t >>= 1) c_bits++;
    if (c < 3 || yi * (uint64_t)c_bits > (uint64_t)bits + 1) return 0;
    uint64_t power = 1, limit = (uint64_t)1 << (bits + 1);
    for (uint64_t i = 0; i < yi; i++) {
        if (power > limit / c) return 0;
        power *= c;
    }
    return power == b && E * (long)yi == F * (1L << k);
}

/* The correctly rounded result of `op` (0 pow, 1 exp, 2 log) at `bits` bits for finite arguments
 * in the domain, by Ziv's loop; NAN if memory runs out. */
static inline double pcr_accurate(int op, double x, double y, int bits) {
    for (int f = 10;; f *= 2) {
        size_t n = PCR_LIMBS(f);
        uint32_t *w = (uint32_t *)calloc(24 * n, 4);
        if (!w) return NAN;
        uint32_t *ln2 = w, *v = w + n, *z = w + 2 * n, *lo = w + 3 * n, *hi = w + 4 * n, *work = w + 5 * n;
        double ln2_err = pcr_mp_ln2(ln2, f, work, work + n), err;
        int negative = 0, K = 0, decided = 0, z_negative = 0;
        double result = NAN;
        if (op == 2) {
            err = pcr_mp_log(v, &negative, x, ln2, ln2_err, f, work);
        } else {
            double z_err = 0;
            if (op == 1) {
                pcr_mp_from_double(z, fabs(x), f);
                z_negative = x < 0;
            } else { /* z = |log x| |y|: |y| = yi 2^(ey - 53) */
                double lh, ll;
                pcr_log_dd(x, &lh, &ll);
                if (fabs(lh * y) > 800) { /* the fast path decides these; a guard for direct calls */
                    free(w);
                    return (lh < 0) == (y < 0) ? HUGE_VAL : 0.0;
                }
                int l_negative, ey;
                double l_err = pcr_mp_log(z, &l_negative, x, ln2, ln2_err, f, work);
                uint64_t yi = (uint64_t)ldexp(frexp(fabs(y), &ey), 53);
                pcr_mp_mul_u32(v, z, (uint32_t)(yi >> 32), f); /* |log x| < 2^10, yi < 2^53: fits 2^64 */
                pcr_mp_shift(v, v, 32, f);
                pcr_mp_mul_u32(z, z, (uint32_t)yi, f);
                pcr_mp_add(z, z, v, f);
                pcr_mp_shift(z, z, (long)ey - 53, f);
                z_err = l_err * ldexp((double)yi, ey - 53) * (1 + 0x1p-40) + 2;
                z_negative = l_negative != (y < 0);
            }
            if (pcr_mp_to_double(z, f) > 800) {
                result = z_negative ? 0.0 : HUGE_VAL;
                decided = 1;
                err = 0;
            } else {
                err = pcr_mp_exp(v, &K, z, z_negative, z_err, ln2, ln2_err, f, work);
            }
        }
        if (!decided) {
            uint64_t n_lo, n_hi;
            double units = err;
            long lsb_lo, lsb_hi;
            if (pcr_mp_add_units(lo, v, units, 1, f) && !pcr_mp_is_zero(lo, f)) {
                pcr_mp_add_units(hi, v, units, 0, f);
                pcr_mp_round(lo, f, K, bits, &n_lo, &lsb_lo);
                pcr_mp_round(hi, f, K, bits, &n_hi, &lsb_hi);
                if (lsb_hi > lsb_lo) n_hi <<= (lsb_hi - lsb_lo); /* one binade up: the same spacing */
                if (n_lo == n_hi) {
                    result = pcr_value(n_lo, lsb_lo, bits);
                    decided = 1;
                } else if (op == 0 && n_hi == n_lo + 1 && pcr_is_power(x, y, 2 * n_lo + 1, lsb_lo - 1, bits)) {
                    result = pcr_value(n_lo & 1 ? n_hi : n_lo, lsb_lo, bits); /* a tie: to even */
                    decided = 1;
                }
            }
        }
        free(w);
        if (decided) return negative ? -result : result;
    }
}

/* ---- the functions ---------------------------------------------------------------------------- */

static inline int pcr_is_odd_integer(double y) {
    return fabs(y) < 0x1p53 && y == (double)(int64_t)y && ((int64_t)y & 1);
}

/* pow at `bits` bits for finite x > 0 and finite y. */
static inline double pcr_pow_positive(double x, double y, int bits) {
    double r;
    return pcr_pow_fast(x, y, bits, &r) ? r : pcr_accurate(0, x, y, bits);
}

static inline double posenc_cr_pow(double x, double y) {
    if (y == 0.0 || x == 1.0) return 1.0;
    if (isnan(x) || isnan(y)) return x + y;
    double ax = fabs(x);
    if (isinf(y)) return ax == 1.0 ? 1.0 : ((ax > 1.0) == (y > 0) ? HUGE_VAL : 0.0);
    int odd = pcr_is_odd_integer(y), negative = signbit(x) && odd;
    double r;
    if (ax == 0.0 || isinf(ax)) {
        r = (ax == 0.0) == (y < 0) ? HUGE_VAL : 0.0;
    } else {
        if (x < 0 && y != floor(y)) return NAN;
        r = pcr_pow_positive(ax, y, 53);
    }
    return negative ? -r : r;
}

static inline double posenc_cr_exp(double x) {
    if (isnan(x)) return x;
    if (isinf(x)) return x > 0 ? x : 0.0;
    double r;
    return pcr_exp_checked(x, 0.0, PCR_EXP_ERR, 53, &r) ? r : pcr_accurate(1, x, 0, 53);
}

static inline double pcr_log_bits(double x, int bits) {
    if (isnan(x) || x < 0) return NAN;
    if (x == 0) return -HUGE_VAL;
    if (isinf(x) || x == 1.0) return x == 1.0 ? 0.0 : x;
    double r;
    return pcr_log_fast(x, bits, &r) ? r : pcr_accurate(2, x, 0, bits);
}

static inline double posenc_cr_log(double x) { return pcr_log_bits(x, 53); }

static inline float posenc_cr_logf(float x) { return (float)pcr_log_bits(x, 24); }

/* x^y rounded once to float32 (x > 0 finite, y finite; others as posenc_cr_pow rounded). */
static inline float posenc_cr_powf(float x, float y) {
    if (x < 0 && isfinite(x) && isfinite(y) && y == floor(y) && y != 0) {
        float r = (float)pcr_pow_positive(-(double)x, y, 24);
        return pcr_is_odd_integer(y) ? -r : r;
    }
    if (!(x > 0) || isinf(x) || !isfinite(y) || x == 1.0f || y == 0.0f) return (float)posenc_cr_pow(x, y); /* exact */
    return (float)pcr_pow_positive(x, y, 24);
}

#endif /* POSENC_CRMATH_H */
