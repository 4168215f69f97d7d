"""Plain RoPE (Su et al.): inv_i = 1/b^(2i/d), attention factor 1."""

from ._common import default_inv_freq

KEYS = {"required": (), "optional": ()}


def validate(params, dims):
    return params


def inv_freq(dims, params, seq_len):
    return default_inv_freq(dims.base, dims.rotary_dim), 1.0
