"""Llama and the families that copy its attention unchanged: Mistral, Mixtral.

`rotate_half` layout, full rotary, every rope type (Llama-3.1's `llama3` included); head_dim
from `head_dim` or hidden_size // num_attention_heads (configuration_llama.py, _mistral, _mixtral).
"""

from . import reader
from .rope_params import RopeFamily, Sizes, single_rope_reader

LLAMA = RopeFamily(Sizes(4096, 32, 32, 2048))
MISTRAL = RopeFamily(Sizes(4096, 32, 32, 4096 * 32))
MIXTRAL = RopeFamily(Sizes(4096, 32, 32, 4096 * 32), default_theta=1e6)

reader("llama")(single_rope_reader(LLAMA))
reader("mistral")(single_rope_reader(MISTRAL))
reader("mixtral")(single_rope_reader(MIXTRAL))
