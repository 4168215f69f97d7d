"""The positional schemes the lab compares, each one's signal taken from posenc itself, so what is
measured is what posenc serves: the sinusoidal table (`posenc.api.sinusoidal`), RoPE cos/sin with
or without a scaling (`posenc.torch.cos_sin` of a `RopeSpec`), the ALiBi bias (`posenc.torch.alibi_bias`).
Only a learned table's values come from training (the model holds them; `LearnedSpec` describes it).

The RoPE scalings (applied at test time to the model trained with plain RoPE) are each one
`RopeSpec`, as a config.json would state it. The static ones are configured for the length they are
evaluated at (factor = that length / the training length, 1 at the training length itself), as a
config.json extending the model to that context states it; dynamic NTK is configured once, for the
longest evaluated length, since one setting for every length is its point:

* linear: every frequency divided by the factor (position interpolation, Chen et al. 2023);
* ntk: the base raised to base * factor^(d/(d-2)) (static NTK-aware scaling);
* dynamic: HF's dynamic NTK with factor = the longest length / the training length: no change up to
  the training length, then base * (factor * length / training length - (factor - 1))^(d/(d-2)) at
  each length, as transformers' dynamic update recomputes it;
* yarn: YaRN with the training length as original_max_position_embeddings (its ramp and attention
  factor as HF computes them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..api.sinusoidal import sinusoidal_table
from ..args import as_positions
from ..dtypes import output_dtype
from ..encodings import AlibiSpec, LearnedSpec, RopeSpec, SinusoidalSpec
from ..torch import alibi_bias, cos_sin
from ..torch.tensors import to_torch
from .schemes import Scheme


@dataclass(frozen=True)
class Geometry:
    """What a scheme's signal depends on: the model's widths, the training length, the longest
    evaluated length (a learned table's rows, the scalings' factor) and RoPE's base."""

    d_model: int
    n_heads: int
    train_len: int
    max_len: int
    rope_base: float

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def extension(self) -> float:
        return self.max_len / self.train_len


def rope_spec(scheme: Scheme, geometry: Geometry, phase: str, length: int) -> RopeSpec:
    """The RoPE spec of `phase` ("train" or "eval") for a model run at `length` positions: training
    is always plain RoPE; a static scaling is the one configured for `length`."""
    base, head_dim = geometry.rope_base, geometry.head_dim
    if phase == "train" or scheme.scaling is None:
        return RopeSpec(head_dim, base=base)
    if scheme.scaling == "dynamic":
        return RopeSpec(head_dim, base=base, scaling={"rope_type": "dynamic", "factor": geometry.extension},
                        max_position_embeddings=geometry.train_len)
    factor = max(1.0, length / geometry.train_len)
    if scheme.scaling == "yarn":
        return RopeSpec(head_dim, base=base, scaling={"rope_type": "yarn", "factor": factor},
                        original_max_position_embeddings=geometry.train_len)
    return RopeSpec(head_dim, base=base, scaling={"rope_type": scheme.scaling, "factor": factor})


def encodings(scheme: Scheme, geometry: Geometry, phase: str, length: int) -> dict:
    """posenc's specs of the scheme's signals in `phase` at `length` positions: {"absolute", "rope",
    "alibi"} as present."""
    out = {}
    if scheme.absolute == "sinusoidal":
        out["absolute"] = SinusoidalSpec(geometry.d_model)
    elif scheme.absolute == "learned":
        out["absolute"] = LearnedSpec(geometry.max_len, dim=geometry.d_model)
    if scheme.rotary:
        out["rope"] = rope_spec(scheme, geometry, phase, length)
    if scheme.alibi:
        out["alibi"] = AlibiSpec(geometry.n_heads)
    return out


@dataclass(frozen=True)
class Signals:
    """What one forward pass at `length` positions takes from the scheme.

    `absolute` [length, d_model] is added to the token embeddings (None: none, or the model's
    learned rows); `cos`, `sin` [length, head_dim] rotate queries and keys, halves duplicated
    ("cat", as rotate_half expects); `bias` [heads or 1, length, length] is added to the attention
    scores and is causal (-inf above the diagonal) for every scheme."""

    absolute: torch.Tensor | None
    cos: torch.Tensor | None
    sin: torch.Tensor | None
    bias: torch.Tensor


def causal_mask(length: int) -> torch.Tensor:
    """[1, length, length]: 0 on and below the diagonal, -inf above (what ALiBi's causal bias holds too)."""
    return torch.full((length, length), float("-inf")).triu(1)[None]


def signals(scheme: Scheme, geometry: Geometry, length: int, phase: str) -> Signals:
    """The scheme's signals for positions 0..length-1 in `phase`, each computed by posenc (float64,
    cast once to float32). A length-dependent scaling (dynamic NTK) sees this length, as HF's
    module does on a fresh forward of that many positions."""
    specs = encodings(scheme, geometry, phase, length)
    positions = np.arange(length, dtype=np.float64)
    absolute = cos = sin = None
    if isinstance(specs.get("absolute"), SinusoidalSpec):
        absolute = to_torch(sinusoidal_table(as_positions(positions), specs["absolute"], output_dtype("float32")))
    if "rope" in specs:
        cos, sin = cos_sin(positions, specs["rope"], dtype=torch.float32, arrangement="cat")
    if "alibi" in specs:
        bias = alibi_bias(geometry.n_heads, length, mode="causal", variant=specs["alibi"].variant, dtype=torch.float32)
    else:
        bias = causal_mask(length)
    return Signals(absolute, cos, sin, bias)


def describe(scheme: Scheme, geometry: Geometry, lengths: list[int]) -> dict:
    """The scheme as the results file records it: posenc's specs for training and for evaluation at
    the longest length, and the numbers they imply (ALiBi slopes, RoPE's inverse frequencies and
    attention factor); a static RoPE scaling, configured per length, also by evaluated length."""
    out = {"trained_as": scheme.trained_as, "summary": scheme.summary}
    for phase in ("train", "eval"):
        specs = encodings(scheme, geometry, phase, geometry.max_len)
        entry = {role: spec.to_dict() for role, spec in specs.items()}
        if "rope" in specs:
            inv_freq, attention = specs["rope"].inv_freq(float(geometry.max_len))  # dynamic's, at the longest
            entry["rope_inv_freq_at_max_len"] = inv_freq.tolist()
            entry["rope_attention_factor"] = attention
        if "alibi" in specs:
            entry["alibi_slopes"] = specs["alibi"].slopes.tolist()
        out[phase] = entry
    if scheme.scaling not in (None, "dynamic"):
        out["eval_rope_by_length"] = {str(length): rope_spec(scheme, geometry, "eval", length).to_dict()
                                      for length in lengths}
    return out
