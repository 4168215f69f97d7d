"""Linear position interpolation: every frequency divided by `factor`."""

from ._common import default_inv_freq, factor_at_least_one

KEYS = {"required": ("factor",), "optional": ()}


def validate(params, dims):
    return {"factor": factor_at_least_one(params)}


def inv_freq(dims, params, seq_len):
    return default_inv_freq(dims.base, dims.rotary_dim) / params["factor"], 1.0
