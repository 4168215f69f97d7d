"""Regenerate golden_sincos.json: sin and cos of hard float64 angles to 30 digits.

Each case is a (position, frequency) pair. "sin"/"cos" are sin(x) and cos(x) of the binary
number x = fl(p * w) (the hard angle itself, fed to the kernels' direct sincos as x * 1.0);
"sin_exact"/"cos_exact" are those of the exact product p * w, what the kernels compute for the
pair as given (native/src/vsincos.h never rounds the product). Both in decimal arithmetic
(60 digits, pi by Machin's formula), so they are independent of any libm. Cases: angles near multiples of pi/2 (best rational approximations
of pi, the worst inputs for range reduction), quadrant boundaries, the 2^24 and 2^27 limits,
huge angles (libm fallback), tiny ones, negatives, and RoPE/sinusoidal frequencies.

    python tests/native/golden_sincos.py
"""

import json
import math
from decimal import Decimal, getcontext
from fractions import Fraction
from pathlib import Path

getcontext().prec = 60


def _atan_inv(n: int) -> Decimal:
    """atan(1/n) by its Taylor series."""
    x = Decimal(1) / n
    x2, term, total, k = x * x, x, x, 1
    while True:
        term *= -x2
        delta = term / (2 * k + 1)
        if abs(delta) < Decimal(10) ** -getcontext().prec:
            return total
        total += delta
        k += 1


PI = 16 * _atan_inv(5) - 4 * _atan_inv(239)


def sin_cos(x: float | Fraction) -> tuple[Decimal, Decimal]:
    """sin and cos of the exact value x (a float's binary value, or a product of two)."""
    d = Decimal(Fraction(x).numerator) / Decimal(Fraction(x).denominator)
    r = d - (d / (2 * PI)).to_integral_value() * 2 * PI  # |r| <= pi
    s, c, term, k = Decimal(0), Decimal(0), Decimal(1), 0
    while abs(term) > Decimal(10) ** -(getcontext().prec + 5) or k < 4:
        if k % 2 == 0:
            c += term if k % 4 == 0 else -term
        else:
            s += term if k % 4 == 1 else -term
        k += 1
        term = term * r / k
    return s, c


def cases() -> list[tuple[float, float]]:
    pi_numerators = [3, 22, 333, 355, 103993, 104348, 208341, 312689, 833719, 1146408, 4272943, 5419351,
                     80143857, 165707065]
    out = [(float(p), 1.0) for p in pi_numerators]
    out += [(float(-p), 1.0) for p in pi_numerators[:6]]
    out += [(float(p), 0.5) for p in (11, 22, 33, 44, 710, 207986)]  # x near multiples of pi/2
    out += [(k * math.pi / 4, 1.0) for k in range(1, 17)]  # quadrant boundaries
    out += [(math.pi / 2, 1.0), (math.pi, 1.0), (2 * math.pi, 1.0), (0.0, 1.0), (-0.0, 1.0), (1e-300, 1.0),
            (1e-9, 1.0), (2.0**-30, 3.0)]
    out += [(2.0**24, 1.0), (2.0**24 - 1, 1.0), (2.0**24 - 0.5, 1.0), (2.0**24 - 0.25, 0.9999),
            (2.0**27 - 1, 1.0), (2.0**27, 1.0), (2.0**27 + 2, 1.0), (1e9, 1.0), (2.0**31, 1.0), (-(2.0**31), 1.0),
            (12345.678, 1.5e3)]  # the last few pass 2^27: libm lanes
    d = 128
    for i in (0, 1, 7, 31, 63):
        w = 1.0 / 10000.0 ** (2 * i / d)
        out += [(p, w) for p in (1.0, 4095.0, 131071.0, 1234567.25, 16777215.0)]
    return out


def main() -> None:
    rows = []
    for p, w in cases():
        s, c = sin_cos(p * w)
        s_exact, c_exact = sin_cos(Fraction(p) * Fraction(w))
        rows.append({"position": float.hex(p), "freq": float.hex(w), "sin": f"{s:.30e}", "cos": f"{c:.30e}",
                     "sin_exact": f"{s_exact:.30e}", "cos_exact": f"{c_exact:.30e}"})
    path = Path(__file__).with_name("golden_sincos.json")
    path.write_text(json.dumps({"generator": "tests/native/golden_sincos.py", "cases": rows}, indent=1) + "\n")
    print(f"wrote {len(rows)} cases to {path}")


if __name__ == "__main__":
    main()
