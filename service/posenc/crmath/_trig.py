"""amp * sin(p w) and amp * cos(p w) rounded once into float32, float16 or bfloat16: Ziv's
strategy in integer fixed point, for the values whose float64 kernel result cannot decide its
rounding (posenc.kernels.rounding: about 2^-21 of a table's values).

p, w and amp are float64 numbers taken as the exact rationals they are; the angle x = p w is an
exact rational too (never rounded). At a working precision of S fraction bits:

* pi comes from Machin's formula (16 atan(1/5) - 4 atan(1/239)) with every truncation counted;
* x is reduced to r = x - k pi/2 (|r| <= pi/4 + 2^-S) with k = round(x / (pi/2)), at enough
  extra bits that k pi/2 is known to better than 2^-(S + 8) whatever the size of x;
* sin r and cos r by their Taylor series, each step truncated (an error under 2 units);
* the quadrant k mod 4 picks +-sin r or +-cos r.

So the value is known within U units of 2^-S, U counted as it is computed. If both ends of
amp * [value - U, value + U] round to the same number of the format, that number is the exact
value rounded once; otherwise S doubles and it runs again. The exact value is never a rounding
boundary for x != 0 (sin and cos of a nonzero rational are transcendental, Lindemann), so the
loop ends; x == 0 is exact (sin 0 = 0, cos 0 = 1: amp rounded, ties to even), as is amp == 0; a
zero value is signed as amp, whatever the signs of p and w (position -0.0 is position 0).
Non-finite inputs give NaN. native/include/posenc_crtrig.h is the C twin: the same argument and
error count (and so the same results); it finds k by float64 estimates instead of a division.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

from ._exact import round_fraction

#: dtype name -> significant bits (round_fraction's `bits`: its FORMATS has each one's range).
FORMAT_BITS = {"float32": 24, "float16": 11, "bfloat16": 8}
START_BITS = 96


@functools.lru_cache(maxsize=16)
def pi_fixed(bits: int) -> int:
    """pi * 2^bits, within 1 (Machin's formula at 24 guard bits: each of its ~bits/2.3 series
    terms truncates once, and the divisions by odd k once more)."""
    guard = 24
    scale = bits + guard

    def atan_inv(n: int) -> int:  # atan(1/n) 2^scale, within 2 * (terms + 1) units
        power = (1 << scale) // n
        total, k, n2, sign = power, 1, n * n, -1
        while power:
            power //= n2
            k += 2
            total += sign * (power // k)
            sign = -sign
        return total

    return (16 * atan_inv(5) - 4 * atan_inv(239)) >> guard


def sin_cos_fixed(x: Fraction, bits: int) -> tuple[int, int, int]:
    """(s, c, u): sin x and cos x as integers of 2^-bits, each within u units."""
    negative = x < 0
    x = abs(x)
    extra = (x.numerator // x.denominator).bit_length() + 10
    scale = bits + extra
    half_pi = pi_fixed(scale) >> 1  # pi/2 within 1 unit at `scale` bits
    angle = (x.numerator << scale) // x.denominator  # within 1 unit
    k = (2 * angle + half_pi) // (2 * half_pi)  # round(x / (pi/2)); k < 2^(extra - 9)
    r = (angle - k * half_pi) >> extra  # within 1 + (k + 1) 2^-extra < 2 units of 2^-bits
    r2 = (r * r) >> bits
    (s, s_steps), (c, c_steps) = _series(r, r2, bits, 1), _series(1 << bits, r2, bits, 0)
    steps = max(s_steps, c_steps)
    sin_x, cos_x = ((s, c), (c, -s), (-s, -c), (-c, s))[k % 4]
    if negative:
        sin_x = -sin_x
    return sin_x, cos_x, 2 * steps + 4


def _series(term: int, r2: int, bits: int, n: int) -> tuple[int, int]:
    """sum of (-1)^j r^(2j+n) / (2j+n)! from its first term (r or 1), truncated at each step."""
    total, steps = term, 0
    while term:
        term = -((term * r2) >> bits) // ((n + 1) * (n + 2))
        n += 2
        total += term
        steps += 1
    return total, steps


def sincos_rounded(p: float, w: float, amp: float, which: str, dtype: str = "float32") -> float:
    """amp * sin(p w) (which="sin") or amp * cos(p w) ("cos"), the product p w exact, rounded once
    to nearest-even into `dtype` ("float32", "float16", "bfloat16"); returned as a float."""
    fmt_bits = FORMAT_BITS[dtype]
    if not (math.isfinite(p) and math.isfinite(w) and math.isfinite(amp)):
        return math.nan
    x = Fraction(p) * Fraction(w)
    amp_q = Fraction(amp)
    if x == 0 or amp == 0:  # exact: amp (cos 0), or a zero signed as amp (position -0.0 is position 0)
        if which == "cos" and x == 0:
            return math.copysign(round_fraction(abs(amp_q), fmt_bits), amp)
        return math.copysign(0.0, amp)
    bits = START_BITS
    while True:
        s, c, u = sin_cos_fixed(x, bits)
        v = s if which == "sin" else c
        low, high = Fraction(v - u, 1 << bits) * amp_q, Fraction(v + u, 1 << bits) * amp_q
        if (low > 0) == (high > 0) and low != 0 and high != 0:
            sign = 1.0 if low > 0 else -1.0
            a, b = round_fraction(abs(low), fmt_bits), round_fraction(abs(high), fmt_bits)
            if a == b:
                return sign * a
        bits *= 2
