"""Helpers every variant builds on."""

from __future__ import annotations

import numpy as np

from ...args import as_float
from ...errors import PosencError
from ..libm import pow_each


def default_inv_freq(base: float, rotary_dim: int) -> np.ndarray:
    """inv_i = 1 / base^(2i/d) for i < ceil(d/2) (HF: base ** (arange(0, d, 2) / d))."""
    return 1.0 / pow_each(base, np.arange(0, rotary_dim, 2, dtype=np.float64) / rotary_dim)


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
