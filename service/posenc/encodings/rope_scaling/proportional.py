"""Proportional RoPE (Gemma 4): head_dim//2 frequencies with exponent over head_dim; only the
first int(prf*head_dim//2) rotate, the rest are exactly 0; all divided by `factor`."""

import numpy as np

from ... import crmath
from ...args import as_float

KEYS = {"required": (), "optional": ("factor",)}


def validate(params, dims):
    return {"factor": as_float(params.get("factor", 1.0), "scaling.factor", minimum=1.0)}


def inv_freq(dims, params, seq_len):
    D = dims.head_dim
    rotated = int(dims.partial_rotary_factor * D // 2)
    inv = np.zeros(D // 2, dtype=np.float64)
    inv[:rotated] = 1.0 / crmath.pow_each(dims.base, 2.0 * np.arange(rotated, dtype=np.float64) / D)
    return inv / params["factor"], 1.0
