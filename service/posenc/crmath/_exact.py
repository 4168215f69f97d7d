"""The exact path: Ziv's strategy in decimal arithmetic, taken when the fast path cannot prove its
rounding (about once in 2^25 calls, and for subnormal results).

Python's decimal rounds ln, exp and products correctly at the context's precision, so at P
digits x^y = exp(y ln x) is known to a relative (2 |z| + 2) 10^(1-P) (z = y ln x): if both ends
of that interval round to the same double (or float32), that is the correctly rounded value;
otherwise P doubles and it runs again. Two ends can straddle a rounding boundary forever only
if the value is a boundary (a midpoint between two neighbours): exp(x) and log(x) of a double
never are (Lindemann: e^q is transcendental for rational q != 0), and whether x^y is one is
decided exactly with integers (`is_power`). So the loop ends, and its result is the correctly
rounded value, ties to even.
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

#: bits -> (exponent of the smallest normal, exponent that overflows): double, float32, and the
#: 16-bit formats the sin/cos tables round into (_trig.py): float16 and bfloat16.
FORMATS = {53: (-1022, 1024), 24: (-126, 128), 11: (-14, 16), 8: (-126, 128)}
START_DIGITS = 40
#: |z| beyond which exp(z) is 0 or inf in any format (the fast path decides those itself).
Z_LIMIT = 800


def round_fraction(q: Fraction, bits: int) -> float:
    """q >= 0 rounded to `bits` significant bits (53 double, 24 float32), ties to even, with the
    format's subnormals and overflow to inf."""
    if q == 0:
        return 0.0
    emin, overflow = FORMATS[bits]
    n, d = q.numerator, q.denominator
    e = n.bit_length() - d.bit_length()  # q in [2^(e-1), 2^(e+1))
    if (n << max(-e, 0)) < (d << max(e, 0)):
        e -= 1  # now 2^e <= q < 2^(e+1)
    spacing = max(e, emin) - (bits - 1)  # the format's spacing around q is 2^spacing
    num, den = n << max(-spacing, 0), d << max(spacing, 0)
    whole, remainder = divmod(num, den)
    if 2 * remainder > den or (2 * remainder == den and whole % 2):
        whole += 1
    if whole.bit_length() + spacing > overflow:
        return math.inf
    return math.ldexp(float(whole), spacing)


def _odd_part(value: Fraction) -> tuple[int, int]:
    """(a, E) with value = a * 2^E and a odd, for a positive dyadic rational."""
    n, d = value.numerator, value.denominator
    shift = (n & -n).bit_length() - 1
    return n >> shift, shift - (d.bit_length() - 1)


def is_power(x: float, y: float, m: Fraction, bits: int) -> bool:
    """Whether x^y == m exactly, for x > 0 and m a midpoint (odd significand of bits + 1 bits).

    With y = n / d in lowest terms (d a power of two), x = a 2^E, m = b 2^F (a, b odd):
    x^y = m iff a^n = b^d and E n = F d. As b > 1, n > 0; n and d coprime make a = c^d and
    b = c^n for an integer c >= 3, so c is a's exact d-th root (d-th roots by repeated integer
    square roots) and c^n < 2^(bits + 1) bounds n."""
    n, d = y.as_integer_ratio()
    if n <= 0:
        return False
    a, e_x = _odd_part(Fraction(x))
    b, e_m = _odd_part(m)
    c = a
    for _ in range(d.bit_length() - 1):  # d = 2^k: k square roots, each exact or no power
        root = math.isqrt(c)
        if root * root != c:
            return False
        c = root
    if c < 3 or n * (c.bit_length() - 1) > bits + 1:
        return False
    return c**n == b and e_x * n == e_m * d


def _ziv(value_at, bits: int, power: tuple[float, float] | None = None) -> float:
    """Ziv's loop: value_at(digits) -> (v, eps) with the exact result within v * (1 +- eps)."""
    digits = START_DIGITS
    while True:
        v, eps = value_at(digits)
        q, slack = Fraction(v.copy_abs()), Fraction(eps)  # copy_abs: abs() would round v to the default context
        low, high = round_fraction(q * (1 - slack), bits), round_fraction(q * (1 + slack), bits)
        if low == high:
            return -low if v.is_signed() else low
        midpoint = (Fraction(low) + Fraction(high)) / 2
        if power is not None and is_power(*power, midpoint, bits):
            return round_fraction(midpoint, bits)  # a tie, rounded to even
        digits *= 2


def pow_exact(x: float, y: float, bits: int = 53) -> float:
    """x ** y correctly rounded, for finite x > 0 and finite y (inf on overflow)."""
    def value_at(digits):
        with localcontext() as ctx:
            ctx.prec = digits
            z = Decimal(x).ln() * Decimal(y)
            if abs(z) > Z_LIMIT:
                return (Decimal(0) if z < 0 else Decimal("1e400")), Decimal(0)
            return z.exp(), (abs(z) + 1) * 2 * Decimal(10) ** (1 - digits)
    return _ziv(value_at, bits, (x, y))


def exp_exact(x: float, bits: int = 53) -> float:
    """exp(x) correctly rounded, for finite x."""
    if abs(x) > Z_LIMIT:
        return 0.0 if x < 0 else math.inf

    def value_at(digits):
        with localcontext() as ctx:
            ctx.prec = digits
            return Decimal(x).exp(), Decimal(10) ** (1 - digits)
    return _ziv(value_at, bits)


def log_exact(x: float, bits: int = 53) -> float:
    """log(x) correctly rounded, for finite x > 0."""
    if x == 1.0:
        return 0.0

    def value_at(digits):
        with localcontext() as ctx:
            ctx.prec = digits
            return Decimal(x).ln(), Decimal(10) ** (1 - digits)
    return _ziv(value_at, bits)
