"""Qwen2 / Qwen2-MoE / Qwen3 / Qwen3-MoE: Llama's RoPE (`rotate_half`, full rotary).

Their sliding-window `layer_types` change the attention mask only; every layer shares one
rotary embedding. Qwen3's config class defaults head_dim to 128 (not hidden // heads).
"""

from . import reader
from .rope_params import RopeFamily, Sizes, single_rope_reader

FAMILIES = {
    "qwen2": RopeFamily(Sizes(4096, 32, 32, 32768)),
    "qwen2_moe": RopeFamily(Sizes(2048, 16, 24, 32768)),
    "qwen3": RopeFamily(Sizes(4096, 32, 32, 32768), head_dim=128),
    "qwen3_moe": RopeFamily(Sizes(2048, 32, 24, 32768)),
}
for _model_type, _family in FAMILIES.items():
    reader(_model_type)(single_rope_reader(_family))
