"""What a correctly rounded pow, exp or log must return, from mpmath at 600 bits rounded once:
independent of posenc and of any libm. (mpmath's own float() truncates; the rounding here is
Python's int / int division, correctly rounded, subnormals included, and for float32 mpmath's
round-half-even to 24 bits.)"""

from __future__ import annotations

from fractions import Fraction

import mpmath
from mpmath.libmp import normalize, round_nearest

#: Far beyond the hardest case these tests hold (pow's known worst case needs 53 + 154 bits).
PREC = 600


def rounded(value: mpmath.mpf, bits: int = 53) -> float:
    """value rounded to nearest, ties to even: a double (bits 53) or a float32 (24), subnormals and
    overflow included."""
    sign, man, exp, bc = value._mpf_
    if not man:
        return 0.0
    exact = Fraction(man) * 2**exp if exp >= 0 else Fraction(man, 1 << -exp)
    if bits == 24:
        if exp + bc > 128:  # at least 2^128: beyond float32
            return (-1) ** sign * float("inf")
        if exp + bc <= -126:  # below 2^-126: float32's subnormal grid, 2^-149
            return (-1) ** sign * round(exact * 2**149) * 2.0**-149  # round(): half to even
        sign, man, exp, bc = normalize(sign, man, exp, bc, 24, round_nearest)
        return (-1) ** sign * (float(man) * 2.0**exp if exp + bc <= 128 else float("inf"))
    try:
        return (-1) ** sign * float(exact)
    except OverflowError:
        return (-1) ** sign * float("inf")


def cr_pow(x: float, y: float, bits: int = 53) -> float:
    with mpmath.workprec(PREC):
        return rounded(mpmath.mpf(x) ** mpmath.mpf(y), bits)


def cr_exp(x: float, bits: int = 53) -> float:
    with mpmath.workprec(PREC):
        return rounded(mpmath.exp(mpmath.mpf(x)), bits)


def cr_log(x: float, bits: int = 53) -> float:
    with mpmath.workprec(PREC):
        return rounded(mpmath.log(mpmath.mpf(x)), bits)
