"""GPT-NeoX, GPT-J, CodeGen, StableLM: the partial-rotary pioneers.

GPT-NeoX (configuration_gpt_neox.py): base `rotary_emb_base`, fraction `rotary_pct`
(default 0.25; both also accepted inside rope_parameters; a top-level `rope_theta` is not
read), `rotate_half` on the first rotary dims. StableLM: `partial_rotary_factor` default
0.25, `rotate_half`; the legacy StableLM-3B (`stablelm_epoch`) spelling `rope_pct` is read
too (transformers 5.24 ignores it and falls back to 0.25). GPT-J / CodeGen
(modeling_gptj.py, modeling_codegen.py): `rotary_dim` (default 64) interleaved dims of each
n_embd // n_head head, base fixed at 10000 (no rope_theta, no scaling); a null rotary_dim
means the whole hidden size, which only works with one head.
"""

from ..errors import PosencError
from . import reader
from .fields import ConfigView, factor_for, head_dim_from
from .positions import ModelPositions
from .rope_params import SPLIT, Default, Dims, RopeFamily, Sizes, build_spec, single_rope_reader

NEOX = RopeFamily(Sizes(6144, 64, 44, 2048), head_dim=SPLIT, default_prf=0.25, theta_keys=("rotary_emb_base",),
                  prf_keys=("rotary_pct",))
STABLELM = RopeFamily(Sizes(2560, 32, 32, 4096), head_dim=SPLIT, default_prf=0.25,
                      prf_keys=("partial_rotary_factor", "rope_pct"))
GPTJ_SIZES = Sizes(4096, 16, 28, 2048, keys=("n_embd", "n_head", "n_layer", "n_positions"))

reader("gpt_neox")(single_rope_reader(NEOX))
reader("stablelm", "stablelm_epoch")(single_rope_reader(STABLELM))


@reader("gptj", "codegen")
def read_gptj(config: dict, strict: bool) -> ModelPositions:
    view = ConfigView(config)
    hidden, heads, layers, n_positions = GPTJ_SIZES.read(view)
    head_dim = head_dim_from(view, hidden, heads, "n_head")
    if "rotary_dim" in config and config["rotary_dim"] is None:
        if heads != 1:
            raise PosencError("config.rotary_dim", f"null means the whole hidden size ({hidden}), wider than a "
                              f"head ({head_dim}) with {heads} heads: the modeling code cannot apply it")
        rotary_dim = head_dim
    else:
        rotary_dim = view.int("rotary_dim", 64)
    if rotary_dim % 2:
        raise PosencError("config.rotary_dim", f"must be even (GPT-J rotates pairs), got {rotary_dim}")
    factor = factor_for(rotary_dim, head_dim, "config.rotary_dim")
    dims = Dims(head_dim, view.field("n_head"), layers, n_positions, view.field("n_positions"))
    spec = build_spec(None, theta=Default(10_000.0, "config.rotary_dim"), prf=Default(factor, "config.rotary_dim"),
                      dims=dims, original=None, layout="interleaved")
    return ModelPositions.single(config["model_type"], config["model_type"], spec, layers)
