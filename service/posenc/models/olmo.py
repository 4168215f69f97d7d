"""OLMo / OLMo-2: Llama's RoPE (`rotate_half`, full rotary, head_dim = hidden // heads).

OLMo-2's q/k norms run before the rotation and do not change it (modeling_olmo2.py)."""

from . import reader
from .rope_params import RopeFamily, Sizes, single_rope_reader

OLMO = RopeFamily(Sizes(4096, 32, 32, 2048))

reader("olmo", "olmo2")(single_rope_reader(OLMO))
