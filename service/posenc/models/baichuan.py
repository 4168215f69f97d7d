"""Baichuan (remote code, not in transformers): RoPE in the 7B models, ALiBi in the 13B ones.

The config does not say which: `model_type` is "baichuan" for all four checkpoints, and each
repository ships its own modeling_baichuan.py. Baichuan-7B and Baichuan2-7B (hidden 4096, 32
layers) rotate q and k with a Llama `RotaryEmbedding` (rotate_half, base 10000, head_dim
hidden // heads); Baichuan-13B and Baichuan2-13B (hidden 5120, 40 layers) add an ALiBi mask
whose slopes `_get_interleave(n_head)` are the paper's Python floats made a float32 tensor
(the "baichuan" variant). vLLM tells them apart by hidden_size, llama.cpp by the layer count;
posenc answers only when both agree, and otherwise refuses: it will not guess.

Baichuan-13B's mask is `slope * key position` (posenc's rows), Baichuan2-13B's `slope *
(key - query)`: the same per query row up to a constant, so the same softmax.
"""

from __future__ import annotations

from ..encodings import AlibiSpec
from ..errors import PosencError
from . import reader
from .fields import ConfigView
from .positions import ModelPositions
from .rope_params import RopeFamily, Sizes, read_dims, read_rope

#: (hidden_size, num_hidden_layers) of the released checkpoints, by the encoding their code applies.
ROPE_SHAPE = (4096, 32)
ALIBI_SHAPE = (5120, 40)
ROPE_FAMILY = RopeFamily(Sizes(4096, 32, 32, 4096))
ALIBI_NOTES = (
    "bias = slope * key position (Baichuan-13B); Baichuan2-13B adds slope * (key - query), "
    "the same per query row up to a constant",
    "which encoding a Baichuan config uses lives in its remote modeling code; posenc reads it "
    "from the checkpoint's shape (hidden_size 5120, 40 layers: ALiBi), as vLLM and llama.cpp do",
)


@reader("baichuan")
def read_baichuan(config: dict, strict: bool) -> ModelPositions:
    view = ConfigView(config)
    # BaichuanConfig's defaults are the 13B's; the 7B repositories ship their own config class.
    shape = (view.int("hidden_size", ALIBI_SHAPE[0]), view.int("num_hidden_layers", ALIBI_SHAPE[1]))
    if shape == ALIBI_SHAPE:
        heads = view.int("num_attention_heads", 40)
        return ModelPositions.single("baichuan", "baichuan", AlibiSpec(heads, variant="baichuan"), shape[1],
                                     apply="bias", notes=ALIBI_NOTES)
    if shape == ROPE_SHAPE:
        dims = read_dims(view, ROPE_FAMILY)
        return ModelPositions.single("baichuan", "baichuan", read_rope(view, ROPE_FAMILY, dims), dims.layers)
    raise PosencError(view.field("hidden_size"), f"a Baichuan config of hidden_size {shape[0]} and {shape[1]} "
                      "layers is neither the 7B shape (4096, 32 layers: RoPE) nor the 13B shape (5120, 40: ALiBi); "
                      "its remote modeling code decides which it applies and posenc will not guess")
