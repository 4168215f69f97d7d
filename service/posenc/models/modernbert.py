"""ModernBERT and its decoder: two RoPEs, one per attention type (configuration_modernbert*.py).

transformers 5 names the types `full_attention` (global; base `global_rope_theta`, default
160000) and `sliding_attention` (local; `local_rope_theta`, default 10000) and writes them
nested in `rope_parameters`; a legacy `rope_scaling` applies to both. Every
`global_attn_every_n_layers`-th layer (default 3), counting from layer 0, is global, unless
`layer_types` says otherwise. head_dim = hidden_size // num_attention_heads, `rotate_half`.
The legacy names "global" / "local" are accepted as aliases of the two layer types.
"""

from . import reader
from .fields import ConfigView
from .layer_types import FULL, SLIDING, entries, periodic_layer_types, rope_per_layer_type
from .positions import ModelPositions
from .rope_params import SPLIT, RopeFamily, Sizes

MODERNBERT = RopeFamily(Sizes(768, 12, 22, 8192), head_dim=SPLIT)
THETA = {FULL: ("global_rope_theta", 160_000.0), SLIDING: ("local_rope_theta", 10_000.0)}
ALIASES = {"global": FULL, "local": SLIDING}


@reader("modernbert", "modernbert-decoder")
def read_modernbert(config: dict, strict: bool) -> ModelPositions:
    view = ConfigView(config)
    specs, dims = rope_per_layer_type(view, MODERNBERT, THETA, legacy_scaled=(FULL, SLIDING),
                                      family_name="ModernBERT")
    layer_types = periodic_layer_types(view, dims.layers, "global_attn_every_n_layers", 3, full_at_zero=True)
    return ModelPositions(config["model_type"], "modernbert", entries(layer_types, specs), aliases=ALIASES)
