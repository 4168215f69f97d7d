"""MPT: ALiBi in every layer (modeling_mpt.py), configured by the nested `attn_config`.

`build_mpt_alibi_tensor` rounds the head count up to a power of two P, uses slopes
2^(-k * alibi_bias_max / P) in float32 and, when P != n_heads, takes the odd-indexed slopes
first (the "mpt" variant). MptConfig: `n_heads` (alias num_attention_heads, default 16),
`n_layers` (alias num_hidden_layers, default 24); MptAttentionConfig: `alibi` (default true),
`alibi_bias_max` (default 8).

The reference's own difference: transformers' MptModel always calls
`build_mpt_alibi_tensor(n_heads, max_seq_len)` with the default alibi_bias_max=8 and never
reads `attn_config.alibi`. posenc follows the config (MosaicML's training code honours both):
a config with another alibi_bias_max gets those slopes and a note; `alibi: false` (a model
trained with learned or rotary positions, which MptModel cannot run) is refused.
"""

from ..encodings import AlibiSpec
from ..errors import PosencError
from ..limits import LIMITS
from . import reader
from .config_keys import aliased_int
from .fields import MAX_LAYERS, ConfigView
from .positions import ModelPositions

REFERENCE_BIAS_MAX = 8.0


@reader("mpt")
def read_mpt(config: dict, strict: bool) -> ModelPositions:
    view = ConfigView(config)
    attn = view.obj("attn_config") or ConfigView({}, view.field("attn_config"))
    heads = aliased_int(view, ("n_heads", "num_attention_heads"), 16, maximum=LIMITS.max_dim)
    layers = aliased_int(view, ("n_layers", "num_hidden_layers"), 24, maximum=MAX_LAYERS)
    if attn.has("rope") and attn.raw["rope"] is not False:
        raise PosencError(attn.field("rope"), "llm-foundry's rotary MPT is not supported: transformers' MptModel "
                          "has no RoPE (it always applies ALiBi)")
    if not attn.bool("alibi", True):
        raise PosencError(attn.field("alibi"), "is false: such an MPT was trained with learned positions "
                          "(MosaicML's remote code), which transformers' MptModel cannot run (it always applies "
                          "ALiBi); posenc will not guess")
    bias_max = attn.float("alibi_bias_max", REFERENCE_BIAS_MAX, exclusive_minimum=0.0, maximum=1e6)
    notes = (("bias = -slope * distance (build_mpt_alibi_tensor); posenc's rows are slope * key position, "
              "the same per query row up to a constant"),)
    if bias_max != REFERENCE_BIAS_MAX:
        notes += ((f"alibi_bias_max {bias_max:g} from attn_config; transformers' MptModel would use 8 "
                   "(it never passes the config's value)"),)
    return ModelPositions.single("mpt", "mpt", AlibiSpec(heads, variant="mpt", alibi_bias_max=bias_max), layers,
                                 apply="bias", notes=notes)
