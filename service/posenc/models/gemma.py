"""Gemma, Gemma-2, Gemma-3 (`gemma3` wraps a `gemma3_text` in `text_config`).

All `rotate_half`, full rotary, head_dim default 256 (configuration_gemma*.py). Gemma and
Gemma-2 share one rotary embedding across layers (Gemma-2's sliding layers change the mask
only). Gemma-3 has one RoPE per layer type (configuration_gemma3.py,
`convert_rope_params_to_dict`): `full_attention` from `rope_theta` (default 1e6) and the
legacy `rope_scaling` (4b+: linear x8), `sliding_attention` from `rope_local_base_freq`
(default 1e4) and never scaled; transformers 5 writes both nested in `rope_parameters`.
Which layers are which: `layer_types`, else every `sliding_window_pattern`-th (default 6).

Gemma-3n (`gemma3n` wraps a `gemma3n_text`) reads its RoPEs the same way
(configuration_gemma3n.py, `convert_rope_params_to_dict`: `rope_theta` default 1e6 and the
legacy `rope_scaling` for full attention, `rope_local_base_freq` default 1e4 for sliding), and
without `layer_types` makes every 5th layer full attention, a fixed period no key changes.
"""

from __future__ import annotations

from ..errors import PosencError
from . import reader
from .fields import ConfigView
from .layer_types import FULL, SLIDING, entries, periodic_layer_types, rope_per_layer_type
from .positions import ModelPositions
from .rope_params import RopeFamily, Sizes, single_rope_reader

GEMMA = RopeFamily(Sizes(3072, 16, 28, 8192), head_dim=256)
GEMMA2 = RopeFamily(Sizes(2304, 8, 26, 8192), head_dim=256)
GEMMA3 = RopeFamily(Sizes(2304, 8, 26, 131_072), head_dim=256)
GEMMA3_THETA = {FULL: ("rope_theta", 1_000_000.0), SLIDING: ("rope_local_base_freq", 10_000.0)}
GEMMA3N = RopeFamily(Sizes(2048, 8, 35, 32_768), head_dim=256)
GEMMA3N_PERIOD = 5

reader("gemma")(single_rope_reader(GEMMA))
reader("gemma2")(single_rope_reader(GEMMA2))


@reader("gemma3_text")
def read_gemma3_text(config: dict, strict: bool) -> ModelPositions:
    return _gemma3(ConfigView(config), config["model_type"])


@reader("gemma3")
def read_gemma3(config: dict, strict: bool) -> ModelPositions:
    """The multimodal wrapper: the language model is `text_config` (absent = Gemma3TextConfig defaults)."""
    text = ConfigView(config).obj("text_config") or ConfigView({}, "config.text_config")
    if "model_type" in text.raw and text.raw["model_type"] != "gemma3_text":
        raise PosencError(text.field("model_type"), f"must be 'gemma3_text', got {text.raw['model_type']!r}")
    return _gemma3(text, "gemma3")


def _gemma3(view: ConfigView, model_type: str) -> ModelPositions:
    specs, dims = rope_per_layer_type(view, GEMMA3, GEMMA3_THETA, legacy_scaled=(FULL,), family_name="Gemma-3")
    layer_types = periodic_layer_types(view, dims.layers, "sliding_window_pattern", 6, full_at_zero=False)
    return ModelPositions(model_type, "gemma3", entries(layer_types, specs))


@reader("gemma3n_text")
def read_gemma3n_text(config: dict, strict: bool) -> ModelPositions:
    view = ConfigView(config)
    specs, dims = rope_per_layer_type(view, GEMMA3N, GEMMA3_THETA, legacy_scaled=(FULL,), family_name="Gemma-3n")
    layer_types = periodic_layer_types(view, dims.layers, None, GEMMA3N_PERIOD, full_at_zero=False)
    return ModelPositions(config["model_type"], "gemma3n_text", entries(layer_types, specs))
