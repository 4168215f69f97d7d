"""Qwen2-VL / Qwen2.5-VL: M-RoPE in every language-model layer (modeling_qwen2_vl.py,
modeling_qwen2_5_vl.py).

Positions are [3, n] (temporal, height, width; text tokens have all three equal). The rotary
class computes cos/sin for each axis with one set of default frequencies (head_dim = `head_dim`
or hidden_size // num_attention_heads), splits the head_dim / 2 frequencies by
`rope_parameters.mrope_section` (default [16, 24, 24]) and takes chunk i from axis i % 3
(`recomposition_frequencies`); `apply_rotary_pos_emb` is Llama's `rotate_half` ("half").
The language model's keys sit at the top level of older configs and in `text_config` of
newer ones (which then wins, as in Qwen2VLConfig); legacy `"type": "mrope"` means default.
Text-config defaults: hidden 8192, 64 heads, 80 layers, max positions 32768, rope_theta 1e6.
"""

from . import reader
from .fields import ConfigView
from .positions import ModelPositions
from .rope_params import RopeFamily, Sizes, read_dims, read_rope

QWEN2_VL_TEXT = RopeFamily(Sizes(8192, 64, 80, 32768), default_theta=1_000_000.0)
DEFAULT_SECTION = (16, 24, 24)
NOTES = ("positions [3, n] (temporal, height, width) from get_rope_index; text tokens: all three equal",
         "the vision tower's own 2-D rotary (VisionRotaryEmbedding) is not covered")


def _with_section(view: ConfigView) -> tuple[ConfigView, bool]:
    """The view with mrope_section in its rope dict (the rotary class's default when absent:
    True), the dict being the one transformers reads (`rope_scaling` if non-empty, else
    `rope_parameters`)."""
    scaling = view.obj("rope_scaling")
    key = "rope_scaling" if scaling is not None and scaling.raw else "rope_parameters"
    params = view.obj(key)
    if params is not None and params.has("mrope_section"):
        return view, False
    raw = {**(params.raw if params is not None else {}), "mrope_section": list(DEFAULT_SECTION)}
    return ConfigView({**view.raw, key: raw}, view.path), True


@reader("qwen2_vl", "qwen2_5_vl", "qwen2_vl_text", "qwen2_5_vl_text")
def read_qwen_vl(config: dict, strict: bool) -> ModelPositions:
    top = ConfigView(config)
    view, defaulted = _with_section(top.obj("text_config") or top)
    dims = read_dims(view, QWEN2_VL_TEXT)
    spec = read_rope(view, QWEN2_VL_TEXT, dims)
    notes = NOTES + (("mrope_section absent: the rotary class's default [16, 24, 24]",) if defaulted else ())
    return ModelPositions.single(config["model_type"], "qwen2_vl", spec, dims.layers, notes=notes)
