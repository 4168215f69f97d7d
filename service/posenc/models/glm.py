"""GLM / GLM-4 (transformers) and ChatGLM2/3 / GLM-4-chat (THUDM remote code, `chatglm`).

transformers' `glm` / `glm4` (modeling_glm.py, modeling_glm4.py): head_dim default 128,
`partial_rotary_factor` default 0.5 (`__post_init__` setdefault), and the first rotary_dim
dims rotated as interleaved pairs (the cos/sin halves are `repeat_interleave`d).

ChatGLM has no transformers class; its facts, from THUDM's modeling_chatglm.py: the head is
`kv_channels` wide (hidden // heads when null; config default 128), `RotaryEmbedding(head // 2)`
rotates the first half of each head as interleaved (x_2i, x_2i+1) pairs with inverse
frequencies (10000 * rope_ratio)^(-2i / (head / 2)) (`rope_ratio` default 1; chatglm3-32k: 50,
glm-4-9b-chat: 500). Layers: `num_layers`; context: `seq_length`. ChatGLM-6B v1's 2-D
positions (`position_encoding_2d`) are a different scheme and refused.
"""

from ..errors import PosencError
from . import reader
from .fields import ConfigView, head_dim_from
from .positions import ModelPositions
from .rope_params import Default, Dims, RopeFamily, Sizes, build_spec, single_rope_reader

GLM = RopeFamily(Sizes(4096, 32, 40, 131072), head_dim=128, default_prf=0.5, layout="interleaved")
CHATGLM_SIZES = Sizes(4096, 32, 28, 2048, keys=("hidden_size", "num_attention_heads", "num_layers", "seq_length"))

reader("glm", "glm4")(single_rope_reader(GLM))


@reader("chatglm")
def read_chatglm(config: dict, strict: bool) -> ModelPositions:
    view = ConfigView(config)
    if view.bool("position_encoding_2d", False):
        raise PosencError("config.position_encoding_2d", "ChatGLM-6B v1's 2-D (block) positions are not RoPE "
                          "over one position; posenc does not implement them")
    if not view.bool("original_rope", True):
        raise PosencError("config.original_rope", "only THUDM's original RoPE (true) is used by ChatGLM2/3/4")
    hidden, heads, layers, seq_length = CHATGLM_SIZES.read(view)
    if "kv_channels" in config and config["kv_channels"] is None:
        head_dim, head_field = head_dim_from(view, hidden, heads, "num_attention_heads"), view.field("num_attention_heads")
    else:
        head_dim, head_field = view.int("kv_channels", 128), view.field("kv_channels")
    ratio = view.float("rope_ratio", 1.0, exclusive_minimum=0.0)
    dims = Dims(head_dim, head_field, layers, seq_length, view.field("seq_length"))
    spec = build_spec(None, theta=Default(10_000.0 * ratio, view.field("rope_ratio")), prf=Default(0.5, head_field),
                      dims=dims, original=None, layout="interleaved")
    return ModelPositions.single("chatglm", "chatglm", spec, layers)
