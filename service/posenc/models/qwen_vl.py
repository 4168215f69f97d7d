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

from ..encodings import RopeSpec
from ..errors import PosencError
from . import reader
from .fields import ConfigView
from .positions import ModelPositions
from .rope_params import RopeFamily, Sizes, read_dims, read_rope

QWEN2_VL_TEXT = RopeFamily(Sizes(8192, 64, 80, 32768), default_theta=1_000_000.0)
DEFAULT_SECTION = (16, 24, 24)
NOTES = ("positions [3, n] (temporal, height, width) from get_rope_index; text tokens: all three equal",
         "the vision tower's own 2-D rotary (VisionRotaryEmbedding) is not covered")


def _split_section(view: ConfigView) -> tuple[ConfigView, object, str, bool]:
    """The view with `mrope_section` moved out of its rope dict (the one transformers reads:
    `rope_scaling` if non-empty, else `rope_parameters`) and legacy type "mrope" read as
    "default", as Qwen2VLTextConfig.convert_rope_params_to_dict does; then the section (the
    rotary class's default when absent), the field it came from, and whether it was absent."""
    scaling = view.obj("rope_scaling")
    key = "rope_scaling" if scaling is not None and scaling.raw else "rope_parameters"
    params = view.obj(key)
    raw = dict(params.raw) if params is not None else {}
    section = raw.pop("mrope_section", None)
    for type_key in ("rope_type", "type"):
        if raw.get(type_key) == "mrope":
            raw[type_key] = "default"
    absent = section is None
    return (ConfigView({**view.raw, key: raw}, view.path), list(DEFAULT_SECTION) if absent else section,
            f"{view.field(key)}.mrope_section", absent)


@reader("qwen2_vl", "qwen2_5_vl", "qwen2_vl_text", "qwen2_5_vl_text")
def read_qwen_vl(config: dict, strict: bool) -> ModelPositions:
    top = ConfigView(config)
    view, section, section_field, defaulted = _split_section(top.obj("text_config") or top)
    dims = read_dims(view, QWEN2_VL_TEXT)
    plain = read_rope(view, QWEN2_VL_TEXT, dims)
    try:
        spec = RopeSpec.from_dict({**plain.to_dict(), "mrope_section": section})
    except PosencError as exc:
        absent = (f"is absent, and the rotary class's default {list(DEFAULT_SECTION)} does not fit head_dim "
                  f"{dims.head_dim}: ") if defaulted else ""
        raise PosencError(section_field, absent + exc.message) from None
    notes = NOTES + (("mrope_section absent: the rotary class's default [16, 24, 24]",) if defaulted else ())
    return ModelPositions.single(config["model_type"], "qwen2_vl", spec, dims.layers, notes=notes)
