"""Helpers every variant builds on."""

from __future__ import annotations

import math

import numpy as np

from ... import crmath
from ...args import as_float
from ...errors import PosencError


def default_inv_freq(base: float, rotary_dim: int) -> np.ndarray:
    """inv_i = 1 / base^(2i/d) for i < ceil(d/2) (HF: base ** (arange(0, d, 2) / d)): the exponent
    rounded to float64, base^exponent correctly rounded (posenc.crmath, the same bits on every CPU),
    then 1.0 divided by it. A base that overflowed (NTK's base * factor^(d/(d-2))) raises
    OverflowError, which RopeSpec.inv_freq reports as non-finite frequencies."""
    if not math.isfinite(base):
        raise OverflowError("the scaled RoPE base overflowed float64")
    return 1.0 / crmath.pow_each(base, np.arange(0, rotary_dim, 2, dtype=np.float64) / rotary_dim)


def factor_at_least_one(params: dict, key: str = "factor") -> float:
    return as_float(params[key], f"scaling.{key}", minimum=1.0)


#: Largest attention factor: it multiplies cos/sin in [-1, 1], and the product must fit every output
#: dtype (float16's largest finite value).
MAX_ATTENTION_FACTOR = 65504.0


def check_attention_factor(value: float, field: str) -> float:
    if not 0.0 <= value <= MAX_ATTENTION_FACTOR:  # NaN fails too
        raise PosencError(field, f"gives an attention factor of {value:g}, outside [0, {MAX_ATTENTION_FACTOR:g}]")
    return value


def require(value, field: str, why: str):
    if value is None:
        raise PosencError(field, f"is required {why}")
    return value
