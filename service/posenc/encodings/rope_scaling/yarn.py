"""YaRN (Peng et al. 2023): interpolate low frequencies, keep high ones, ramp in between,
and scale attention by mscale. Follows HF `_compute_yarn_parameters` (docs/formulas.md section 1), its
logarithms correctly rounded (posenc.crmath)."""

import math

import numpy as np

from ... import crmath
from ...args import as_bool, as_float
from ...errors import PosencError
from ._common import check_attention_factor, default_inv_freq, require

MAX_ROTATIONS = 1e12

KEYS = {
    "required": (),
    "optional": ("factor", "attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "truncate"),
}


def validate(params, dims):
    if dims.rotary_dim % 2:
        raise PosencError("head_dim", f"YaRN needs an even rotary dim, got {dims.rotary_dim}")
    original = require(dims.original_or_max, "original_max_position_embeddings", "for YaRN (or max_position_embeddings)")
    out = {}
    if params.get("factor") is None:
        max_len = require(dims.max_position_embeddings, "scaling.factor", "for YaRN (or max_position_embeddings)")
        out["factor"] = max_len / original
    else:
        out["factor"] = as_float(params["factor"], "scaling.factor")
    if out["factor"] < 1.0:
        raise PosencError("scaling.factor", f"must be >= 1, got {out['factor']}")
    for key in ("attention_factor", "mscale", "mscale_all_dim"):
        if params.get(key) is not None:
            out[key] = as_float(params[key], f"scaling.{key}", minimum=0.0)
    # HF reads beta_fast/beta_slow with `or`, so 0 means the default too. They count rotations
    # over the original context (32 and 1); past MAX_ROTATIONS, log(original / (beta * 2 pi)) underflows.
    out["beta_fast"] = as_float(params.get("beta_fast") or 32.0, "scaling.beta_fast", exclusive_minimum=0.0,
                                maximum=MAX_ROTATIONS)
    out["beta_slow"] = as_float(params.get("beta_slow") or 1.0, "scaling.beta_slow", exclusive_minimum=0.0,
                                maximum=MAX_ROTATIONS)
    out["truncate"] = as_bool(params.get("truncate", True), "scaling.truncate")
    for key in ("beta_fast", "beta_slow"):
        try:
            finite = math.isfinite(_correction_dim(dims, out[key]))
        except (ValueError, ZeroDivisionError, OverflowError):  # log(0): rotations * 2 pi overflowed
            finite = False
        if not finite:
            raise PosencError(f"scaling.{key}", f"{out[key]:g} rotations put the correction dim out of range")
    check_attention_factor(attention_factor(out), "scaling.attention_factor" if "attention_factor" in out
                           else "scaling.mscale")
    return out


def get_mscale(scale: float, mscale: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * mscale * crmath.log(scale) + 1.0


def attention_factor(params) -> float:
    if params.get("attention_factor") is not None:
        return params["attention_factor"]
    factor = params["factor"]
    if params.get("mscale") and params.get("mscale_all_dim"):
        return get_mscale(factor, params["mscale"]) / get_mscale(factor, params["mscale_all_dim"])
    return get_mscale(factor)


def _correction_dim(dims, rotations: float) -> float:
    """The frequency index that turns `rotations` times over the original context (HF's formula)."""
    return (dims.rotary_dim * crmath.log(dims.original_or_max / (rotations * 2 * math.pi))
            / (2 * crmath.log(dims.base)))


def correction_range(dims, params) -> tuple[float, float]:
    """The [low, high] frequency-index band where the ramp runs (docs/formulas.md: D=128, b=1e4, L=2048
    -> 16, 41)."""
    d = dims.rotary_dim
    low, high = _correction_dim(dims, params["beta_fast"]), _correction_dim(dims, params["beta_slow"])
    if params["truncate"]:
        low, high = math.floor(low), math.ceil(high)
    return max(low, 0), min(high, d - 1)


def inv_freq(dims, params, seq_len):
    d = dims.rotary_dim
    base_inv = default_inv_freq(dims.base, d)
    low, high = correction_range(dims, params)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(d // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)
    inv = (base_inv / params["factor"]) * ramp + base_inv * (1.0 - ramp)
    return inv, attention_factor(params)
