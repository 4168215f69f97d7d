"""RoPE scaling variants: one registry of pure functions, one small file per variant.

Every variant provides
  * `KEYS`: required and optional keys of its `scaling` dict (checked at the boundary),
  * `validate(params, dims) -> params`: range checks, naming the offending key,
  * `inv_freq(dims, params, seq_len) -> (inv_freq float64[n_freq], attention_factor)`.
All math is float64 (HF computes float32; see docs/formulas.md section 0). `dims` is a
`RopeDims`; `seq_len` is only read by the length-dependent variants (dynamic, longrope).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from . import default, dynamic, linear, llama3, longrope, ntk, proportional, yarn


@dataclass(frozen=True)
class RopeDims:
    head_dim: int
    rotary_dim: int  # int(head_dim * partial_rotary_factor)
    partial_rotary_factor: float
    base: float
    max_position_embeddings: int | None
    original_max_position_embeddings: int | None

    @property
    def original_or_max(self) -> int | None:
        return self.original_max_position_embeddings or self.max_position_embeddings


VARIANTS: dict[str, ModuleType] = {
    "default": default,
    "linear": linear,
    "ntk": ntk,
    "dynamic": dynamic,
    "yarn": yarn,
    "longrope": longrope,
    "llama3": llama3,
    "proportional": proportional,
}

#: Names older configs use for the same variants.
ALIASES = {"su": "longrope"}
