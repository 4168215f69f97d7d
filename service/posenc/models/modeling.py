"""What lives in a family's modeling code rather than in its config: the pairing its
`apply_rotary_pos_emb` rotates (`rotate_half` or GPT-J's pairwise one), a default partial
rotary factor, a flag that switches the pairing, NoPE rules on layer types, and how a legacy
flat `rope_scaling` is spread over per-layer-type RoPEs. Each fact is checked against
transformers' own modules by tests/test_models_truth.py (goldens from generate_models.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Modeling:
    layout: str = "half"
    default_prf: float | None = None
    interleave_key: str | None = None  # a config flag whose true means interleaved pairs
    #: (config view, layer type) -> True when layers of that type skip RoPE (NoPE)
    nope: Callable | None = None
    #: layer types a legacy flat `rope_scaling` scales (None: every type shares one RoPE)
    legacy_scaled: tuple[str, ...] | None = None
    ignored_head_keys: tuple[str, ...] = ()


def _exaone4_nope(view, layer_type: str) -> bool:
    """Exaone-4: with a sliding window, full-attention layers skip RoPE (`if self.sliding_window is
    None or self.is_sliding`)."""
    return layer_type == "full_attention" and view.raw.get("sliding_window") is not None


def _cohere2_nope(view, layer_type: str) -> bool:
    return layer_type == "full_attention"


INTERLEAVED = Modeling(layout="interleaved")
#: model_type -> its modeling facts; absent: Llama's (`rotate_half`, full rotary, every layer).
MODELING: dict[str, Modeling] = {
    "ernie4_5": INTERLEAVED,
    "ernie4_5_moe": INTERLEAVED,
    "helium": INTERLEAVED,
    "exaone4": Modeling(nope=_exaone4_nope),
    "cohere2": Modeling(layout="interleaved", nope=_cohere2_nope),
    "olmo3": Modeling(legacy_scaled=("full_attention",)),
    "deepseek_v3": Modeling(layout="interleaved", interleave_key="rope_interleave"),
}


def modeling(model_type) -> Modeling:
    return MODELING.get(model_type, Modeling())
