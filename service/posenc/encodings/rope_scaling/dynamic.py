"""Dynamic NTK: the base grows with the sequence length beyond max_position_embeddings.

Stateless here: the result depends only on `seq_len` (HF's module keeps the largest
length it has seen; see docs/library.md, "Dynamic NTK and LongRoPE are stateless")."""

from ... import crmath
from ...errors import PosencError
from ._common import default_inv_freq, factor_at_least_one, require

KEYS = {"required": ("factor",), "optional": ()}


def validate(params, dims):
    require(dims.max_position_embeddings, "max_position_embeddings", "for dynamic NTK scaling")
    if dims.rotary_dim <= 2:
        raise PosencError("head_dim", f"dynamic NTK scaling needs a rotary dim > 2, got {dims.rotary_dim}")
    return {"factor": factor_at_least_one(params)}


def inv_freq(dims, params, seq_len):
    d, factor, max_len = dims.rotary_dim, params["factor"], dims.max_position_embeddings
    s = max_len if seq_len is None else max(seq_len, max_len)
    base = dims.base * crmath.pow((factor * s / max_len) - (factor - 1), d / (d - 2))  # OverflowError as `**`
    return default_inv_freq(base, d), 1.0
