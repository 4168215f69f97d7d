"""LongRoPE (Phi-3): per-frequency rescale factors, `long_factor` once the sequence is
longer than original_max_position_embeddings, `short_factor` otherwise.

Stateless here: the choice depends only on the `seq_len` you pass.

Phi-3.5-MoE adds `short_mscale` / `long_mscale`: the attention factor of the short and the long
regime, replacing the sqrt(1 + ln(factor) / ln(original)) default (PhimoeRotaryEmbedding).
Both or neither: a model that scales only one regime is not one posenc has seen."""

import math

import numpy as np

from ... import crmath
from ...args import as_float, as_vector
from ...errors import PosencError
from ._common import check_attention_factor, default_inv_freq, require

KEYS = {"required": ("long_factor", "short_factor"), "optional": ("factor", "attention_factor", "short_mscale", "long_mscale")}


def validate(params, dims):
    original = require(dims.original_or_max, "original_max_position_embeddings", "for LongRoPE")
    if original < 2:  # the default attention factor divides by ln(original)
        raise PosencError("original_max_position_embeddings", f"must be >= 2 for LongRoPE, got {original}")
    n_freq = (dims.rotary_dim + 1) // 2
    out = {
        key: tuple(float(v) for v in as_vector(params[key], f"scaling.{key}", n_freq))
        for key in ("long_factor", "short_factor")
    }
    for key in ("long_factor", "short_factor"):
        if min(out[key]) <= 0:
            raise PosencError(f"scaling.{key}", "entries must be > 0")
    if params.get("factor") is None:
        max_len = require(dims.max_position_embeddings, "scaling.factor", "for LongRoPE (or max_position_embeddings)")
        out["factor"] = max_len / original
    else:
        out["factor"] = as_float(params["factor"], "scaling.factor", exclusive_minimum=0.0)
    if params.get("attention_factor") is not None:
        out["attention_factor"] = as_float(params["attention_factor"], "scaling.attention_factor", minimum=0.0)
    given = [key for key in ("short_mscale", "long_mscale") if params.get(key) is not None]
    if len(given) == 1:
        missing = ({"short_mscale", "long_mscale"} - set(given)).pop()
        raise PosencError(f"scaling.{missing}", f"is required with scaling.{given[0]}")
    for key in given:  # each is the attention factor of its range
        out[key] = check_attention_factor(as_float(params[key], f"scaling.{key}", minimum=0.0), f"scaling.{key}")
    check_attention_factor(_attention_factor(dims, out), "scaling.attention_factor")
    return out


def uses_long_factor(dims, seq_len) -> bool:
    return seq_len is not None and seq_len > dims.original_or_max


def inv_freq(dims, params, seq_len):
    ext = np.asarray(params["long_factor" if uses_long_factor(dims, seq_len) else "short_factor"])
    inv = default_inv_freq(dims.base, dims.rotary_dim) / ext
    if "long_mscale" in params:
        return inv, params["long_mscale" if uses_long_factor(dims, seq_len) else "short_mscale"]
    return inv, _attention_factor(dims, params)


def _attention_factor(dims, params) -> float:
    if params.get("attention_factor") is not None:
        return params["attention_factor"]
    factor = params["factor"]
    return 1.0 if factor <= 1 else math.sqrt(1 + crmath.log(factor) / crmath.log(dims.original_or_max))
