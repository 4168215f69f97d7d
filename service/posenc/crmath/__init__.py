"""Correctly rounded pow, exp and log: the same bits on every CPU, C library and Python build.

Frequencies (RoPE's 1/base^(2i/d), sinusoidal and t2t timescales, ALiBi slopes), scaling factors
and attention factors come from these, never from libm or numpy: glibc picks another `pow` on x86
CPUs without FMA (1 ulp apart: pow(500000, 0.484375), Llama-3's inv_freq[31]), numpy's float64
power/exp run SVML on AVX-512 CPUs, and other C libraries round otherwise again. A correctly
rounded result is one number, whoever computes it: these functions, native/include/posenc_crmath.h
(the same algorithm in C, for libposenc's kernels and C clients) and mpmath rounded once agree bit
for bit (tests/test_crmath.py).

How: a double-double fast path (_fast.py, ~2^-80 relative error) whose rounding test proves the
result, else Ziv's strategy in decimal arithmetic with exact midpoint detection (_exact.py).
`pow_each` and `exp_each` run the C twin through posenc.native's binding when it is built (the
same numbers, ~50x faster: frequencies of a new spec cost microseconds, not milliseconds), the
Python code otherwise.
`sincos_rounded` gives amp * sin(p w) or amp * cos(p w), the product exact, rounded once to float32,
float16 or bfloat16: the exact path of the sin/cos kernels (kernels/rounding.py).
Results with float32 precision (`powf`, `logf`) round the exact value once to float32 (BLOOM's
and MPT's float32 ALiBi slopes, T5's float32 log). The domain errors follow `math`: log of a
non-positive number and pow of a negative base to a non-integer power raise ValueError, a finite
result too large for a double raises OverflowError (`pow_each` / `exp_each` give inf instead).
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING

from ._fast import exp_fast, log_fast, pow_fast

if TYPE_CHECKING:
    import numpy as np


def pow_value(x: float, y: float, bits: int = 53) -> float:
    """x ** y correctly rounded for finite x > 0 and finite y, inf where it overflows."""
    value, ok = pow_fast(x, y, bits)
    if ok:
        return value
    from ._exact import pow_exact  # decimal and fractions load only when needed

    return pow_exact(x, y, bits)


def exp_value(x: float, bits: int = 53) -> float:
    """exp(x) correctly rounded for finite x, inf where it overflows."""
    value, ok = exp_fast(x, bits)
    if ok:
        return value
    from ._exact import exp_exact

    return exp_exact(x, bits)


def log_value(x: float, bits: int = 53) -> float:
    """log(x) correctly rounded for finite x > 0."""
    value, ok = log_fast(x, bits)
    if ok:
        return value
    from ._exact import log_exact

    return log_exact(x, bits)


def _finite(value: float, what: str) -> float:
    if math.isinf(value):
        raise OverflowError(f"{what}: result too large")
    return value


def pow(x, y) -> float:  # math.pow's name and contract
    """x ** y correctly rounded (math.pow's special cases: they are exact)."""
    x, y = float(x), float(y)
    if not (math.isfinite(x) and math.isfinite(y)) or x == 0.0 or y == 0.0 or x == 1.0:
        return math.pow(x, y)  # inf, nan, 0, 1 or a domain error, all defined exactly by C99 Annex F
    if x < 0.0:
        if not y.is_integer():
            raise ValueError("math domain error")
        value = _finite(pow_value(-x, y), "pow")
        return -value if abs(y) < 2.0**53 and int(y) % 2 else value
    return _finite(pow_value(x, y), "pow")


def exp(x) -> float:
    """exp(x) correctly rounded."""
    x = float(x)
    if not math.isfinite(x):
        return math.exp(x)
    return _finite(exp_value(x), "exp")


def log(x) -> float:
    """Natural logarithm correctly rounded."""
    x = float(x)
    if not math.isfinite(x) or x <= 0.0:
        return math.log(x)  # inf, nan, or ValueError
    return log_value(x)


def powf(x, y) -> float:
    """x ** y for float32 x and y (as numpy.float32 or floats that are float32 values), rounded
    once to float32 (returned as a float holding that float32 value). x > 0."""
    return pow_value(float(x), float(y), 24)


def logf(x) -> float:
    """log(x) rounded once to float32, for a float32 x > 0 (T5's float32 log)."""
    return log_value(float(x), 24)


def sincos_rounded(p, w, amp=1.0, which: str = "sin", dtype: str = "float32") -> float:
    """amp * sin(p w) (which="sin") or amp * cos(p w) ("cos"), p w the exact product of the two
    floats, rounded once into `dtype` ("float32", "float16" or "bfloat16"), returned as a float:
    the value every float32/16-bit sin/cos table element is (_trig.py; Ziv's strategy in integers,
    ~20 us a call: the kernels take it for the few values their float64 result leaves undecided)."""
    from ._trig import FORMAT_BITS, sincos_rounded as exact  # fractions load only when needed

    if which not in ("sin", "cos") or dtype not in FORMAT_BITS:
        raise ValueError(f"sincos_rounded: which must be 'sin' or 'cos' and dtype one of {sorted(FORMAT_BITS)}")
    return exact(float(p), float(w), float(amp), which, dtype)


@functools.cache
def _binding():
    """posenc.native's CPython binding, or None (not built, POSENC_NATIVE=0, or a POSENC_ISA this CPU
    cannot run: that error belongs to the first kernel call, not to a spec's frequencies)."""
    from ..errors import PosencError

    try:
        from .. import native
    except PosencError:
        return None
    return native.BINDING


def pow_each(base: float, exponents) -> np.ndarray:
    """base ** e for each e (float64 array), inf where it overflows; base > 0 finite."""
    import numpy as np

    exponents = np.ascontiguousarray(exponents, dtype=np.float64).reshape(-1)
    binding = _binding()
    if binding is None:
        return np.array([pow_value(base, e) for e in exponents.tolist()], dtype=np.float64)
    out = np.empty_like(exponents)
    binding.cr_pow_each(float(base), exponents, out)
    return out


def exp_each(x) -> np.ndarray:
    """exp(v) for each v (float64 array), inf where it overflows."""
    import numpy as np

    x = np.ascontiguousarray(x, dtype=np.float64).reshape(-1)
    binding = _binding()
    if binding is None:
        return np.array([exp_value(v) for v in x.tolist()], dtype=np.float64)
    out = np.empty_like(x)
    binding.cr_exp_each(x, out)
    return out


__all__ = ["exp", "exp_each", "exp_value", "log", "log_value", "logf", "pow", "pow_each", "pow_value", "powf",
           "sincos_rounded"]
