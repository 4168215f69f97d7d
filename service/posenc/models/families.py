"""Imports every family module so each registers its reader."""

from . import baichuan, cohere, deepseek, falcon, gemma, generic, glm, llama, modernbert, neox, olmo, phi, qwen  # noqa: F401
from . import absolute, bloom, learned, mpnet, mpt, qwen_vl, seq2seq, t2t, t5  # noqa: F401  (non-RoPE families, M-RoPE)
from . import moonshine, t5gemma  # noqa: F401  (rotary encoder-decoders: Moonshine, T5Gemma)
