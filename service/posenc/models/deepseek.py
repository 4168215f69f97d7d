"""DeepSeek-V2 / V3: RoPE on the `qk_rope_head_dim` slice of multi-head latent attention.

The rotary part of each head is its own `qk_rope_head_dim` (default 64) vectors q_pe / k_pe,
so the spec's head_dim is that size (the config classes overwrite head_dim with it). Layout:
V2 multiplies (x_2i, x_2i+1) pairs as complex numbers (`apply_rotary_emb`), i.e. interleaved;
V3 de-interleaves first when `rope_interleave` is true, its default (configuration_deepseek_v3.py),
and uses `rotate_half` when it is false. YaRN's `mscale` / `mscale_all_dim` set the cos/sin
factor; the attention's softmax scale is also multiplied by mscale(factor, mscale_all_dim)^2
(`yarn_apply_mscale`), which is the attention's business, not the encoding's: see the note.
"""

from . import reader
from .fields import ConfigView
from .positions import ModelPositions
from .rope_params import RopeFamily, Sizes, read_dims, read_rope

V2 = RopeFamily(Sizes(4096, 32, 32, 2048), head_dim=("qk_rope_head_dim", 64), layout="interleaved")
V3 = RopeFamily(Sizes(7168, 128, 61, 4096), head_dim=("qk_rope_head_dim", 64), layout="interleaved")
SOFTMAX_NOTE = ("attention softmax scale is qk_head_dim**-0.5 * mscale(factor, mscale_all_dim)**2 "
                "(yarn_apply_mscale), applied by the attention, not by these cos/sin")


def _read(config: dict, family: RopeFamily, interleave_key: str | None) -> ModelPositions:
    view = ConfigView(config)
    dims = read_dims(view, family)
    layout = family.layout
    if interleave_key is not None and not view.bool(interleave_key, True):
        layout = "half"
    spec = read_rope(view, family, dims, layout=layout)
    notes = (SOFTMAX_NOTE,) if spec.scaling_params.get("mscale_all_dim") else ()
    return ModelPositions.single(config["model_type"], config["model_type"], spec, dims.layers, notes=notes)


@reader("deepseek_v2")
def read_deepseek_v2(config: dict, strict: bool) -> ModelPositions:
    return _read(config, V2, None)


@reader("deepseek_v3")
def read_deepseek_v3(config: dict, strict: bool) -> ModelPositions:
    return _read(config, V3, "rope_interleave")
