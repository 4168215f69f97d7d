"""pow and exp over arrays, one value at a time through the C library.

numpy sends float64 `power` and `exp` to SVML kernels on AVX-512 CPUs: on an AVX-512 Xeon,
np.power(10000.0, 2i/8192) differs from libm's pow in 189 of 4096 values (1 ulp), while on an
AVX2 CPU numpy calls libm itself. Frequencies computed with numpy would therefore differ
between the two kinds of node, and every sin/cos row with them. math.pow / math.exp call
glibc, whose results do not depend on the vector ISA, so a spec gives the same frequencies on
every node of a fleet (and the kernels the same rows: posenc.h, "Batch invariance")."""

from __future__ import annotations

import math

import numpy as np


def _overflowing_to_inf(fn, *args) -> float:
    """libm's value, +inf where it overflows (Python raises OverflowError there; numpy gives inf)."""
    try:
        return fn(*args)
    except OverflowError:
        return math.inf


def pow_each(base: float, exponents: np.ndarray) -> np.ndarray:
    """base ** e for each e, float64, through libm's pow."""
    return np.array([_overflowing_to_inf(math.pow, base, e) for e in exponents.tolist()], dtype=np.float64)


def exp_each(x: np.ndarray) -> np.ndarray:
    """exp(v) for each v, float64, through libm's exp."""
    return np.array([_overflowing_to_inf(math.exp, v) for v in x.tolist()], dtype=np.float64)
