"""The fast path: log, exp and pow in double-double arithmetic, with a rounding test.

Plain float64 operations only (+, -, *, /, frexp, ldexp; no libm function, no FMA), in a
subset numba compiles as it is (posenc/kernels/crmath.py), so the library and the numba
kernels run this very code. native/include/posenc_crmath.h is the same algorithm in C on the
same tables (_tables.py). Every function returns a value and whether it is proven correctly
rounded; when it is not (a result within the error bound of a rounding boundary, about once
in 2^25 calls, or a subnormal result) the caller takes the exact path (_exact.py).

Error bounds (relative, for positive finite inputs; docs/platforms.md derives them):
* log_dd: |hi + lo - log x| <= LOG_ERR * |hi|. The reduction x = 2^e * m, m * c_i = 1 + t is
  exact (two_prod), so the error is the polynomial's, about 2^-85 of t where |t| <= 2^-8.
* exp_dd: 2^q * (hi + lo) within EXP_ERR of exp(zh + zl), relative, for an exact argument.
* pow: z = y * log x as a double-double whose error is |z| * (LOG_ERR + 2^-100); exp of it
  within EXP_ERR + 1.01 * |z| * Z_ERR.
* log_d: the same reduction in plain double, within LOG_D_ERR: the first try of a float32 log
  (T5's), which needs 2^-25 and so rarely the double-double.
"""

import math

import numpy as np

from ._tables import (
    EXP_C_H,
    EXP_C_L,
    EXP_C_M,
    EXP_INV,
    EXP_T1,
    EXP_T2,
    LN2_H,
    LN2_L,
    LOG_C,
    LOG_G,
    LOG_SPLIT,
    LOG_T,
    THIRD,
)

SPLIT = 134217729.0  # 2^27 + 1: Veltkamp's splitter
LOG_ERR = 2.0**-80
LOG_D_ERR = 2.0**-40
EXP_ERR = 2.0**-90
#: What z's double-double adds to LOG_ERR: y * lo rounded (2^-53 of a term 2^-52 of z) and slack.
Z_ERR = LOG_ERR + 2.0**-100
#: Beyond these the result is inf or 0 whatever the rounding: exp(709.79) > DBL_MAX, exp(-745.2) < 2^-1075.
EXP_OVERFLOW = 709.79
EXP_UNDERFLOW = -745.2
INF = math.inf


def two_sum(a, b):
    """(s, e) with s = fl(a + b) and s + e = a + b exactly (Knuth)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def fast_two_sum(a, b):
    """two_sum when |a| >= |b| (or a == 0): three operations (Dekker)."""
    s = a + b
    return s, b - (s - a)


def two_prod(a, b):
    """(p, e) with p = fl(a * b) and p + e = a * b exactly (Dekker with Veltkamp's split;
    exact unless a product's low part falls below 2^-1022, which the bounds allow for)."""
    p = a * b
    t = SPLIT * a
    ah = t - (t - a)
    al = a - ah
    t = SPLIT * b
    bh = t - (t - b)
    bl = b - bh
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def log_dd(x):
    """log(x) for a finite x > 0 as (hi, lo), within LOG_ERR * |hi|.

    x = 2^e * m with m in [1, 2); c = LOG_C[i] ~ 1/m for i = round((m - 1) * 128) (m/2 from
    LOG_SPLIT on), so m * c = 1 + t exactly with |t| <= 2^-8 + 2^-51, and
    log x = e ln2 + LOG_T[i] + log1p(t), log1p(t) = t - t^2/2 + t^3 (1/3 - t/4 + t^2 G(t)),
    G the rest of the series to t^11 (truncation under 2^-91 of t)."""
    m, e = math.frexp(x)
    m *= 2.0
    e -= 1
    i = int((m - 1.0) * 128.0 + 0.5)  # (m - 1) * 128 + 0.5 is exact: a multiple of 2^-45 below 129
    if i >= LOG_SPLIT:
        e += 1
    ph, pl = two_prod(m, LOG_C[i])
    th, tl = fast_two_sum(ph - 1.0, pl)  # ph - 1 exact (ph in [0.99, 1.01]), |pl| <= ulp(ph) / 2
    sh, sl = two_prod(th, th)
    g = LOG_G[0] + th * (LOG_G[1] + th * (LOG_G[2] + th * (LOG_G[3] + th * (LOG_G[4] + th * (LOG_G[5]
                                                                                        + th * LOG_G[6])))))
    bh, bl = fast_two_sum(THIRD[0], -0.25 * th)
    bl += THIRD[1] + sh * g
    ch, cl = two_prod(sh, th)
    cl += sl * th
    ph, pl = two_prod(ch, bh)
    pl += ch * bl + cl * bh
    wh, wl = two_sum(-0.5 * sh, ph)
    wl += pl - 0.5 * sl
    gh, gl = fast_two_sum(th, wh)
    gl += wl + tl / (1.0 + th)  # log1p(th + tl) = log1p(th) + tl / (1 + th) + O(tl^2)
    ah, al = e * LN2_H, e * LN2_L  # e * LN2_H exact: 42 bits times |e| < 2^11
    hh, hl = fast_two_sum(ah, LOG_T[i][0])  # |ah| >= ln2 > |LOG_T| unless e == 0
    hi, lo = two_sum(hh, gh)
    lo += hl + al + LOG_T[i][1] + gl
    return fast_two_sum(hi, lo)


def log_d(x):
    """log(x) for a finite x > 0 in plain double, within LOG_D_ERR relative: log_dd's reduction
    with t = m c - 1 rounded once (exact where c is 1 or 1/2, the entries that see x near 1) and
    log1p(t) to t^7 (truncation under 2^-59 of t)."""
    m, e = math.frexp(x)
    m *= 2.0
    e -= 1
    i = int((m - 1.0) * 128.0 + 0.5)
    if i >= LOG_SPLIT:
        e += 1
    t = m * LOG_C[i] - 1.0
    t2 = t * t
    q = (0.5 - t * (1.0 / 3)) + t2 * ((0.25 - t * 0.2) + t2 * (1.0 / 6 - t * (1.0 / 7)))
    return (e * LN2_H + LOG_T[i][0]) + (t - t2 * q + e * LN2_L)


def exp_dd(zh, zl):
    """exp(zh + zl) as (hi, lo, q): 2^q * (hi + lo), hi in [0.99, 2), within EXP_ERR relative.
    Needs EXP_UNDERFLOW <= zh <= EXP_OVERFLOW and |zl| <= 2^-40 |zh|.

    k = round(z * 2^14 / ln2), r = z - k ln2 / 2^14 (|r| <= 2^-15.5; ln2 / 2^14 in three parts
    whose first two times k are exact), exp(r) = 1 + r + r^2/2 + r^3 q(r) (q to r^3/720),
    2^(k / 2^14) = 2^q * T1[k / 128 mod 128] * T2[k mod 128]."""
    kf = zh * EXP_INV
    k = int(kf + 0.5) if kf >= 0 else -int(0.5 - kf)
    rh, rl = two_sum(zh - k * EXP_C_H, -(k * EXP_C_M))  # zh - k C_H exact (Sterbenz)
    rh, rl = two_sum(rh, rl + (zl - k * EXP_C_L))
    sh, sl = two_prod(rh, rh)
    sl += 2.0 * rh * rl
    q = rh * sh * (1.0 / 6 + rh * (1.0 / 24 + rh * (1.0 / 120 + rh * (1.0 / 720))))
    eh, el = fast_two_sum(rh, 0.5 * sh)
    el += rl + 0.5 * sl + q
    vh, vl = fast_two_sum(1.0, eh)
    vl += el
    kk = k + (1 << 30)  # non-negative, a multiple of 2^14 added: the same bits below
    t1, t2 = EXP_T1[(kk >> 7) & 127], EXP_T2[kk & 127]
    ph, pl = two_prod(t1[0], t2[0])
    pl += t1[0] * t2[1] + t1[1] * t2[0]
    rh, rl = two_prod(ph, vh)
    rl += ph * vl + pl * vh
    hi, lo = fast_two_sum(rh, rl)
    return hi, lo, (kk >> 14) - (1 << 16)


def half_gaps(r, bits):
    """(up, down): half the gaps from r > 0 to its neighbours at `bits` bits (below a power of two
    the gap is half as wide)."""
    m, ex = math.frexp(r)
    up = math.ldexp(0.5, ex - bits)
    return up, (0.5 * up if m == 0.5 else up)


def round_checked(hi, lo, err, bits):
    """(r, ok): r = hi + lo rounded to `bits` (53: double, 24: float32: hi in [2^-126, 2^128)) bits,
    ok when every value within err of hi + lo rounds to r (then r is the correctly rounded
    value of anything known to lie within err of hi + lo). hi > 0 normal, |lo| <= ulp(hi)."""
    r = hi + lo
    if bits < 53:
        r = float(np.float32(r))  # to nearest, ties to even, at 24 bits (r within float32's normal range)
        s, _ = two_sum(hi - r, lo)
        up, down = half_gaps(r, bits)
        if s >= up:  # hi + lo rounded to a float32 midpoint, and that to the wrong neighbour
            r += 2.0 * up
        elif -s >= down:
            r -= 2.0 * down
    s, _ = two_sum(hi - r, lo)  # hi - r exact (Sterbenz): e = s + t = hi + lo - r, of s's sign
    up, down = half_gaps(r, bits)
    # |e| <= |s| (1 + 2^-53) < fl(|s| (1 + 2^-50)), and fl(a + err) < h implies a + err < h (h is a double):
    # the values within err of r + e lie strictly between r's two rounding boundaries
    if s >= 0:
        return r, abs(s) * (1.0 + 2.0**-50) + err < up and err < down
    return r, abs(s) * (1.0 + 2.0**-50) + err < down


def scaled_result(r, q, bits):
    """(2^q * r, ok): exact for normal results; ok False for results that would be subnormal (the
    rounding at `bits` bits is not the subnormal one), inf for overflow."""
    m, ex = math.frexp(r)
    e = ex + q  # 2^q * r = m * 2^e, m in [0.5, 1)
    if bits == 53:
        top, bottom = 1024, -1021
    else:
        top, bottom = 128, -125
    if e > top:
        return INF, True
    if e < bottom:
        return 0.0, False
    return math.ldexp(m, e), True


def exp_checked(zh, zl, err, bits):
    """(exp(z), ok) for z = zh + zl; err bounds the relative error of exp_dd's value for this z
    (EXP_ERR, plus what an inexact z adds). See round_checked and scaled_result."""
    if zh > EXP_OVERFLOW:
        return INF, True
    if zh < EXP_UNDERFLOW:
        return 0.0, True
    hi, lo, q = exp_dd(zh, zl)
    r, ok = round_checked(hi, lo, hi * err, bits)
    if not ok:
        return r, False
    return scaled_result(r, q, bits)


def pow_from_log(lh, ll, y, bits):
    """(x ** y, ok) from log_dd(x) = (lh, ll): exp(y log x) (the xPos kernels take each column's
    log once)."""
    zh, zl = two_prod(y, lh)
    zl += y * ll
    return exp_checked(zh, zl, EXP_ERR + 1.01 * abs(zh) * Z_ERR + 2.0**-1000, bits)


def pow_fast(x, y, bits):
    """(x ** y, ok) for finite x > 0 and finite y, rounded to `bits` bits (53 or 24)."""
    lh, ll = log_dd(x)
    return pow_from_log(lh, ll, y, bits)


def exp_fast(x, bits):
    """(exp(x), ok) for finite x."""
    return exp_checked(x, 0.0, EXP_ERR, bits)


def log_fast(x, bits):
    """(log(x), ok) for finite x > 0, x != 1; at 24 bits log_d first."""
    if bits < 53:
        v = log_d(x)
        r, ok = round_checked(abs(v), 0.0, abs(v) * LOG_D_ERR, bits)
        if ok:
            return (r if v > 0 else -r), True
    hi, lo = log_dd(x)
    r, ok = round_checked(abs(hi), lo if hi > 0 else -lo, abs(hi) * LOG_ERR, bits)
    return (r if hi > 0 else -r), ok


#: The functions kernels/crmath.py compiles with numba, callees first.
JIT_ORDER = ("two_sum", "fast_two_sum", "two_prod", "log_dd", "log_d", "exp_dd", "half_gaps", "round_checked",
             "scaled_result",
             "exp_checked", "pow_from_log", "pow_fast", "exp_fast", "log_fast")
