"""RoPE and ALiBi together for one sequence (some teams use both; no Llama model does)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..args import as_choice, as_positions
from ..dtypes import output_dtype
from ..kernels import MODES
from ..encodings import RopeSpec
from .alibi import alibi_slopes, alibi_bias_positions
from .rope import as_rope_spec, rope_cos_sin


@dataclass(frozen=True)
class RopeAlibiSpec:
    """A RoPE spec plus ALiBi heads: rope_alibi returns the cos/sin cache and the bias."""

    rope: RopeSpec
    n_heads: int
    variant: str = "paper"
    mode: str = "causal"
    alibi_bias_max: float = 8

    def __post_init__(self):
        object.__setattr__(self, "rope", as_rope_spec(self.rope, "rope"))
        alibi_slopes(self.n_heads, variant=self.variant, alibi_bias_max=self.alibi_bias_max)  # validates
        as_choice(self.mode, "mode", MODES)


@dataclass(frozen=True)
class RopeAlibi:
    cos: np.ndarray  # [n, n_freq]
    sin: np.ndarray  # [n, n_freq]
    bias: np.ndarray  # [n_heads, n, n], query i and key j both taken from `positions`


def rope_alibi(positions, spec: RopeAlibiSpec, *, seq_len=None, dtype="float32") -> RopeAlibi:
    """cos/sin for `positions` and the ALiBi bias between every pair of them."""
    positions = as_positions(positions)
    cos, sin = rope_cos_sin(positions, spec.rope, seq_len=seq_len, dtype=dtype)
    slopes = alibi_slopes(spec.n_heads, variant=spec.variant, alibi_bias_max=spec.alibi_bias_max)
    bias = alibi_bias_positions(slopes, positions, positions, spec.mode, output_dtype(dtype))
    return RopeAlibi(cos=cos, sin=sin, bias=bias)
