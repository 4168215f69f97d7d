"""Static NTK-aware scaling: the base grows to base * factor^(d/(d-2)), once, for every length."""

import math

from ... import crmath
from ...errors import PosencError
from ._common import default_inv_freq, factor_at_least_one

KEYS = {"required": ("factor",), "optional": ()}


def _stretched(base: float, factor: float, d: int) -> float:
    """base * factor^(d/(d-2)), the power correctly rounded (posenc.crmath); OverflowError as `**`."""
    return base * crmath.pow(factor, d / (d - 2))


def validate(params, dims):
    if dims.rotary_dim <= 2:
        raise PosencError("head_dim", f"NTK scaling needs a rotary dim > 2, got {dims.rotary_dim}")
    factor = factor_at_least_one(params)
    try:
        stretched = _stretched(dims.base, factor, dims.rotary_dim)
    except OverflowError:
        stretched = math.inf
    if not math.isfinite(stretched):  # a spec whose frequencies cannot be computed is refused when made
        raise PosencError("scaling.factor", f"stretches the base {dims.base:g} past the largest float "
                          f"(base * factor^(d/(d-2)), factor {factor:g})")
    return {"factor": factor}


def inv_freq(dims, params, seq_len):
    return default_inv_freq(_stretched(dims.base, params["factor"], dims.rotary_dim), dims.rotary_dim), 1.0
