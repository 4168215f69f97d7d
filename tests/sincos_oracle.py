"""What a correctly rounded sin/cos table element must be: amp * sin(p * w) (or cos) of the exact
real numbers p, w, amp, rounded once to nearest-even into float32, float16 or bfloat16.

Independent of posenc's kernels and of any libm's float64 sin: two oracles.

* `exact_value` / `rounded`: mpmath at PREC bits (the product p*w exact, mpmath's own argument
  reduction, which widens its precision by the argument's magnitude), rounded once by integer
  arithmetic on the mantissa (never float() then a cast: that rounds twice). `correctly_rounded`
  raises the precision until the value's error interval rounds to one value (Ziv's strategy).
* `scan_column`: every integer position 0..stop-1 of one frequency at once, in numpy longdouble
  (x87's 64-bit mantissa on x86-64), for the exhaustive scans. The angle p*w is never rounded:
  p = a*T + b, and each of a*T*w and b*w is the sum of two float64 products that are exact
  (w split into 26 + 27 bits, Veltkamp); sin/cos of each part come from glibc's sinl/cosl
  (correct reduction, within an ulp of longdouble), joined by angle addition in longdouble. The
  result is within about 8 * 2^-64 * amp of the exact value (checked against mpmath by
  `longdouble_error`); an element whose longdouble value lies within MARGIN (2^-56 * amp, 32
  times that) of a rounding boundary is resolved by mpmath. Where numpy's longdouble has fewer
  than 64 mantissa bits (arm64 macOS, Windows: it is a double) `LONGDOUBLE_OK` is False and the
  scans cannot run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import ml_dtypes
import mpmath
import numpy as np

#: mpmath's first working precision: the hardest float32 case of 2^24 positions sits ~2^-30 ulp from
#: a midpoint (24 + 30 bits); `correctly_rounded` goes higher where 200 bits do not decide.
PREC = 200
#: (significand bits with the implicit one, smallest normal exponent, largest exponent)
FORMATS = {"float32": (24, -126, 127), "float16": (11, -14, 15), "bfloat16": (8, -126, 127)}
NUMPY_DTYPES = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16),
                "bfloat16": np.dtype(ml_dtypes.bfloat16)}
UINT = {"float32": np.uint32, "float16": np.uint16, "bfloat16": np.uint16}
WHICH = ("sin", "cos")

LONGDOUBLE_BITS = np.finfo(np.longdouble).nmant + 1
#: x87 extended (64) or IEEE quad (113); not a double, not IBM's double-double (nmant 105, no fixed ulp)
LONGDOUBLE_OK = LONGDOUBLE_BITS in (64, 113)
#: positions a*T + b: the a*T and b parts each take one sinl/cosl per value of a or b
T = 4096
#: |longdouble value - exact| is below ~8 * 2^-64 * amp (module docstring); within this of a
#: boundary the rounding is decided by mpmath
MARGIN = 2.0**-56
_LD = np.longdouble


# --- mpmath: one element ------------------------------------------------------------------------

def exact_value(p: float, w: float, amp: float, which: str, prec: int = PREC) -> mpmath.mpf:
    """amp * sin(p*w) or amp * cos(p*w), p*w the exact product, at `prec` bits."""
    with mpmath.workprec(prec):
        x = mpmath.mpf(p) * mpmath.mpf(w)  # 106 bits at most: exact
        trig = mpmath.sin(x) if which == "sin" else mpmath.cos(x)
        return mpmath.mpf(amp) * trig


def rounded(value: mpmath.mpf, dtype: str) -> float:
    """`value` rounded once to nearest, ties to even, into `dtype` (subnormals and overflow to inf
    included), as the float holding that value; a zero keeps the sign of `value`."""
    precision, emin, emax = FORMATS[dtype]
    sign, man, exp, bc = value._mpf_
    if not man:
        return 0.0
    top = exp + bc - 1  # 2^top <= |value| < 2^(top+1)
    quantum = max(top, emin) - (precision - 1)
    if exp >= quantum:
        n = man << (exp - quantum)
    else:
        shift = quantum - exp
        n, rest = man >> shift, man & ((1 << shift) - 1)
        half = 1 << (shift - 1)
        if rest > half or (rest == half and n & 1):
            n += 1
    magnitude = math.inf if n.bit_length() - 1 + quantum > emax else math.ldexp(n, quantum)
    return -magnitude if sign else magnitude


def correctly_rounded(p: float, w: float, amp: float, which: str, dtype: str) -> float:
    """The element's correctly rounded value (Ziv): exact_value at PREC bits, doubled until every
    number within 2^(8 - prec) of it (far beyond mpmath's error at prec bits) rounds alike. A
    nonzero angle's sin and cos are transcendental, never a boundary, so that ends; tiny angles
    take more bits (cos(1e-44) = 1 - 2^-290: an amplitude at a midpoint then needs ~300). The zero
    angle is exact: sin 0, cos amp."""
    prec = PREC
    while True:
        value = exact_value(p, w, amp, which, prec)
        if p == 0 or w == 0:
            return rounded(value, dtype)
        with mpmath.workprec(prec + 16):
            slack = abs(value) * mpmath.mpf(2) ** (8 - prec)
            if _same(rounded(value - slack, dtype), rounded(value + slack, dtype)):
                return rounded(value, dtype)
        prec *= 2
        assert prec <= 1 << 16, f"no rounding decided at {prec} bits: p={p!r} w={w!r} amp={amp!r} {which}"


def _same(a: float, b: float) -> bool:
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def midpoint_distance(value: mpmath.mpf, dtype: str) -> tuple[float, float, float]:
    """(rounded value, distance from `value` to the nearest rounding boundary in units of the
    gap between the rounded value and its neighbour on value's side (0.5 at a grid point), and
    the same distance absolute)."""
    result = rounded(value, dtype)
    kind = NUMPY_DTYPES[dtype].type
    with mpmath.workprec(PREC):
        residual = value - mpmath.mpf(result)
        toward = math.inf if residual >= 0 else -math.inf
        gap = abs(mpmath.mpf(float(np.nextafter(kind(result), kind(toward)))) - mpmath.mpf(result))
        distance = gap / 2 - abs(residual)
        return result, float(distance / gap), float(distance)


def bits(values, dtype: str) -> np.ndarray:
    """The bit patterns of `values` (floats holding `dtype` values) in `dtype`."""
    return np.asarray(values, dtype=np.float64).astype(NUMPY_DTYPES[dtype]).view(UINT[dtype])


# --- longdouble: a whole column of consecutive positions ------------------------------------------

def _veltkamp(w: float) -> tuple[float, float]:
    """w = hi + lo exactly, hi with 26 significant bits, lo with 27 (no FMA needed)."""
    c = 134217729.0 * w  # 2^27 + 1
    hi = c - (c - w)
    return hi, w - hi


def sincos_integer_multiples(n: np.ndarray, w: float) -> tuple[np.ndarray, np.ndarray]:
    """longdouble sin and cos of the exact n*w, n integers below 2^27 (float64)."""
    w_hi, w_lo = _veltkamp(w)
    hi, lo = (n * w_hi).astype(_LD), (n * w_lo).astype(_LD)  # both products exact: 27 + 27 bits at most
    s_hi, c_hi, s_lo, c_lo = np.sin(hi), np.cos(hi), np.sin(lo), np.cos(lo)
    return s_hi * c_lo + c_hi * s_lo, c_hi * c_lo - s_hi * s_lo


def longdouble_error(samples: int = 400, seed: int = 5) -> float:
    """The largest |longdouble - mpmath| of sincos_integer_multiples over random n < 2^24 and w
    in (0, 1], in units of 2^-64: the error the MARGIN stands on (measured ~2-3)."""
    rng = np.random.default_rng(seed)
    n = rng.integers(0, 2**24, samples).astype(np.float64)
    w = rng.random(samples)
    worst = 0.0
    for k in range(samples):
        s, c = sincos_integer_multiples(n[k:k + 1], float(w[k]))
        for which, got in (("sin", s[0]), ("cos", c[0])):
            exact = exact_value(float(n[k]), float(w[k]), 1.0, which)
            hi = float(got)  # got = hi + lo to 2^-106 relative (exactly for x87)
            lo = float(got - _LD(hi))
            with mpmath.workprec(PREC):
                worst = max(worst, float(abs(mpmath.mpf(hi) + mpmath.mpf(lo) - exact)) * 2.0**64)
    return worst


@dataclass
class Column:
    """One chunk of a scanned column: positions start..start+len-1, for `which` in ("sin", "cos")
    the correctly rounded float32 values and their distances to the nearest rounding boundary,
    in ulps (`dist_ulp`, the gap toward the value's side) and absolute over amp (`dist_amp`)."""

    start: int
    values: dict[str, np.ndarray]
    dist_ulp: dict[str, np.ndarray]
    dist_amp: dict[str, np.ndarray]
    resolved: int  # elements mpmath decided


def _float32_with_distance(y: np.ndarray, amp: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """float32 rounding of longdouble `y`, distance to the nearest boundary (ulps and absolute),
    and which elements lie within MARGIN * amp of a boundary (or rounded through a float64 midpoint)."""
    hi = y.astype(np.float64)
    lo = (y - hi.astype(_LD)).astype(np.float64)  # y = hi + lo to ~2^-117 relative
    f = hi.astype(np.float32)
    f64 = f.astype(np.float64)
    residual = (hi - f64) + lo  # hi - f64 exact (Sterbenz)
    toward = np.where(residual >= 0, np.float32(np.inf), np.float32(-np.inf))
    gap = np.abs(np.nextafter(f, toward).astype(np.float64) - f64)
    dist_abs = gap / 2 - np.abs(residual)
    return f, dist_abs / gap, dist_abs / abs(amp), dist_abs < MARGIN * abs(amp)


def scan_column(w: float, amp: float, stop: int = 2**24, chunk_rows: int = 64):
    """Yield `Column` chunks covering positions 0..stop-1 (stop a multiple of T, at most 2^24),
    each element the correctly rounded float32 of amp * sin/cos(p * w)."""
    if not LONGDOUBLE_OK:
        raise RuntimeError(f"numpy longdouble has {LONGDOUBLE_BITS} significand bits: no fast oracle here")
    if stop % T or stop > 2**24:
        raise ValueError("stop must be a multiple of T up to 2^24")
    s_b, c_b = sincos_integer_multiples(np.arange(T, dtype=np.float64), w)
    amp_ld = _LD(amp)
    for a0 in range(0, stop // T, chunk_rows):
        a = np.arange(a0, min(a0 + chunk_rows, stop // T), dtype=np.float64) * T
        s_a, c_a = sincos_integer_multiples(a, w)
        s_a, c_a = (amp_ld * s_a)[:, None], (amp_ld * c_a)[:, None]
        values, dist_ulp, dist_amp, resolved = {}, {}, {}, 0
        for which in WHICH:
            y = (s_a * c_b + c_a * s_b) if which == "sin" else (c_a * c_b - s_a * s_b)
            f, d_ulp, d_amp, unsure = _float32_with_distance(y.reshape(-1), amp)
            for k in np.flatnonzero(unsure).tolist():
                f[k], d_ulp[k], d_abs = midpoint_distance(exact_value(float(a0 * T + k), w, amp, which), "float32")
                d_amp[k] = d_abs / abs(amp)
                resolved += 1
            values[which], dist_ulp[which], dist_amp[which] = f, d_ulp, d_amp
        yield Column(a0 * T, values, dist_ulp, dist_amp, resolved)
