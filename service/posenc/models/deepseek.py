"""DeepSeek-V2 / V3: RoPE on the `qk_rope_head_dim` slice of multi-head latent attention.

The rotary part of each head is its own `qk_rope_head_dim` (default 64) vectors q_pe / k_pe,
so the spec's head_dim is that size (the config classes overwrite head_dim with it). Layout:
V2 multiplies (x_2i, x_2i+1) pairs as complex numbers (`apply_rotary_emb`), i.e. interleaved;
V3 de-interleaves first when `rope_interleave` is true, its default (configuration_deepseek_v3.py),
and uses `rotate_half` when it is false. YaRN's `mscale` / `mscale_all_dim` set the cos/sin
factor; the attention's softmax scale is also multiplied by mscale(factor, mscale_all_dim)^2
(`yarn_apply_mscale`), which is the attention's business, not the encoding's: see the note.

DeepSeek-V3.2 (and AXK-2, the same modeling code): every layer is V3's MLA (always interleaved,
`apply_rotary_pos_emb_interleave`) plus a DeepSeek sparse attention indexer (`*Indexer`, which
picks the index_topk keys each query attends to). The indexer rotates its own q (index_n_heads
heads) and k (one head), each index_head_dim wide, on their first qk_rope_head_dim dims, with the
same cos/sin but half-split (`apply_rotary_pos_emb`): posenc gives it its own layer type,
"indexer", over the same layers; "default" is the MLA attention's q_pe / k_pe.
"""

from ..encodings import RopeSpec
from ..errors import PosencError
from . import reader
from .fields import ConfigView
from .positions import LayerPositions, ModelPositions
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


#: DeepSeek-V3.2's and AXK-2's config-class defaults (index_head_dim 128 for both)
V32 = RopeFamily(Sizes(7168, 128, 61, 163840), head_dim=("qk_rope_head_dim", 64), layout="interleaved")
AXK2 = RopeFamily(Sizes(2048, 32, 48, 131072), head_dim=("qk_rope_head_dim", 32), layout="interleaved")
INDEX_HEAD_DIM = 128


@reader("deepseek_v32", "axk2")
def read_deepseek_v32(config: dict, strict: bool) -> ModelPositions:
    """Two rotations per layer: the MLA attention's interleaved one ("default") and the sparse
    attention indexer's half-split one ("indexer"), both from the one rotary embedding."""
    family = {"deepseek_v32": V32, "axk2": AXK2}[config["model_type"]]
    view = ConfigView(config)
    main = _read(config, family, None).encodings["default"]
    rope = main.spec.head_dim
    width = view.int("index_head_dim", INDEX_HEAD_DIM)
    if width < rope:
        raise PosencError(view.field("index_head_dim"), f"must be >= qk_rope_head_dim ({rope}): the indexer "
                          f"rotates the first qk_rope_head_dim dims of its index_head_dim-wide heads, got {width}")
    attention = LayerPositions("default", main.spec, main.layers, main.apply,
                               ("the MLA attention's q_pe / k_pe (qk_rope_head_dim wide), interleaved pairs",)
                               + main.notes)
    indexer = LayerPositions(
        "indexer", RopeSpec.from_dict({**main.spec.to_dict(), "layout": "half"}), main.layers, "half",
        (f"the DeepSeek sparse attention indexer of the same layers (it picks the index_topk keys each query "
         f"attends to): the first qk_rope_head_dim = {rope} of the {width} dims of its q heads and of its one k "
         f"head (index_head_dim) rotate, half-split, with the attention's cos/sin; the other {width - rope} pass "
         "unrotated",))
    return ModelPositions(config["model_type"], config["model_type"], {"default": attention, "indexer": indexer})
