"""Llama 3.1 scaling: keep short wavelengths, divide long ones by `factor`, blend the band between."""

import math

import numpy as np

from ...args import as_float
from ...errors import PosencError
from ._common import default_inv_freq, factor_at_least_one, require

KEYS = {
    "required": ("factor", "low_freq_factor", "high_freq_factor"),
    "optional": (),
}


def validate(params, dims):
    out = {
        "factor": factor_at_least_one(params),
        "low_freq_factor": as_float(params["low_freq_factor"], "scaling.low_freq_factor", exclusive_minimum=0.0),
        "high_freq_factor": as_float(params["high_freq_factor"], "scaling.high_freq_factor", exclusive_minimum=0.0),
    }
    require(dims.original_max_position_embeddings, "original_max_position_embeddings", "for llama3 scaling")
    if out["high_freq_factor"] < out["low_freq_factor"]:  # equal is Llama-4's: no smoothed band
        raise PosencError("scaling.high_freq_factor", "must be >= scaling.low_freq_factor")
    return out


def bands(dims, params) -> np.ndarray:
    """Per frequency: 0 kept, 1 smoothed, 2 divided (Llama-3.1: 29 / 6 / 29)."""
    inv = default_inv_freq(dims.base, dims.rotary_dim)
    wavelen = 2 * math.pi / inv
    original = dims.original_max_position_embeddings
    low_wavelen = original / params["low_freq_factor"]
    high_wavelen = original / params["high_freq_factor"]
    return np.where(wavelen < high_wavelen, 0, np.where(wavelen > low_wavelen, 2, 1))


def inv_freq(dims, params, seq_len):
    inv = default_inv_freq(dims.base, dims.rotary_dim)
    factor, low, high = params["factor"], params["low_freq_factor"], params["high_freq_factor"]
    smooth = (dims.original_max_position_embeddings * inv / (2 * math.pi) - low) / (high - low)
    band = bands(dims, params)
    out = np.where(band == 2, inv / factor, inv)
    return np.where(band == 1, (1 - smooth) * inv / factor + smooth * inv, out), 1.0
