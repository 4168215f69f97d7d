"""BLOOM: ALiBi in every layer (modeling_bloom.py), no position embedding.

`_get_alibi_slopes(n_head)` raises a float32 base to integer powers with `torch.pow` (the
"bloom" variant: an ulp from the paper's float64 values for some head counts), and
`build_alibi_tensor` multiplies by the key position: the bias is `slope * key position`,
added to the attention scores. BloomConfig: `n_head` (alias num_attention_heads, default 8),
`n_layer` (alias num_hidden_layers, default 2).
"""

from ..encodings import AlibiSpec
from ..limits import LIMITS
from . import reader
from .config_keys import aliased_int
from .fields import MAX_LAYERS, ConfigView
from .positions import ModelPositions

NOTES = (
    "bias = slope * key position (build_alibi_tensor), translation-invariant per query row",
    "transformers casts the bias to the model dtype: bfloat16/float16 checkpoints round it",
)


@reader("bloom")
def read_bloom(config: dict, strict: bool) -> ModelPositions:
    view = ConfigView(config)
    heads = aliased_int(view, ("n_head", "num_attention_heads"), 8, maximum=LIMITS.max_dim)
    layers = aliased_int(view, ("n_layer", "num_hidden_layers"), 2, maximum=MAX_LAYERS)
    notes = NOTES
    if "offset_alibi" in config:  # a Megatron training knob BloomModel never reads
        notes += ("offset_alibi is ignored, as transformers' BloomModel ignores it",)
    return ModelPositions.single("bloom", "bloom", AlibiSpec(heads, variant="bloom"), layers, apply="bias",
                                 notes=notes)
