"""Falcon: RoPE, or ALiBi when `alibi` is true (modeling_falcon.py).

RoPE: `rotate_half`, full rotary, head_dim = hidden_size // num_attention_heads (a read-only
property of FalconConfig), default base 1e4, every rope type. ALiBi: BLOOM's slopes, which
Falcon multiplies by the key positions in bfloat16 (`build_alibi_tensor`): the "falcon"
variant, added to the attention scores ("bias").
"""

from ..encodings import AlibiSpec
from . import reader
from .fields import ConfigView
from .positions import ModelPositions
from .rope_params import SPLIT, RopeFamily, Sizes, read_dims, read_rope

FALCON = RopeFamily(Sizes(4544, 71, 32, 2048), head_dim=SPLIT)
#: FalconConfig's backward-compatible `n_embed` wins over hidden_size.
FALCON_N_EMBED = RopeFamily(Sizes(4544, 71, 32, 2048, keys=("n_embed", "num_attention_heads", "num_hidden_layers",
                                                            "max_position_embeddings")), head_dim=SPLIT)


@reader("falcon")
def read_falcon(config: dict, strict: bool) -> ModelPositions:
    view = ConfigView(config)
    family = FALCON_N_EMBED if view.has("n_embed") else FALCON
    dims = read_dims(view, family)
    if view.bool("alibi", False):
        heads = view.int("num_attention_heads", FALCON.sizes.num_attention_heads)
        return ModelPositions.single("falcon", "falcon", AlibiSpec(heads, variant="falcon"), dims.layers,
                                     apply="bias", notes=("bias = slopes * key position, formed in bfloat16",))
    return ModelPositions.single("falcon", "falcon", read_rope(view, family, dims), dims.layers)
