"""What lives in a family's modeling code rather than in its config: the pairing its
`apply_rotary_pos_emb` rotates (`rotate_half` or GPT-J's pairwise one), a default partial
rotary factor, NoPE rules on layer types, and how a legacy
flat `rope_scaling` is spread over per-layer-type RoPEs. Each fact is checked against
transformers' own modules by tests/test_models_truth.py (goldens from generate_models.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Modeling:
    layout: str = "half"
    default_prf: float | None = None
    #: (config view, layer type) -> True when layers of that type skip RoPE (NoPE)
    nope: Callable | None = None
    #: layer types a legacy flat `rope_scaling` scales (None: every type shares one RoPE)
    legacy_scaled: tuple[str, ...] | None = None
    ignored_head_keys: tuple[str, ...] = ()
    #: config keys its modeling code never reads for the rotation (MiniMax-M3's rotary_dim: the rope
    #: dict's partial_rotary_factor decides; Qwen2.5-Omni's talker's audio timing, which sets
    #: position ids as M-RoPE image grids do, not cos/sin)
    ignored_keys: tuple[str, ...] = ()
    #: its config class gives each layer type its own default RoPE when the config's is flat (a
    #: legacy rope_theta sets only some types'): posenc reads only the nested rope_parameters
    nested_only: bool = False
    #: a mechanism of its modeling code posenc does not reproduce: every config of it is refused
    unsupported: str | None = None
    #: its rotary class reads {"rope_type": "dynamic", "alpha": a} as static NTK: base * a^(d/(d-2))
    ntk_alpha: bool = False
    #: its config class derives absent `no_rope_layers` from `no_rope_layer_interval` (this default)
    nope_interval: int | None = None
    #: M-RoPE as its modeling code applies `mrope_section`: "chunked" (Qwen2-VL's split, chunk i from
    #: axis i % 3), "interleaved" (Qwen3-VL's apply_interleaved_mrope) or "ignored" (its rotary class
    #: never reads the section: Qwen3-Omni's code predictor); None: a section is refused
    mrope: str | None = None
    mrope_default: tuple[int, ...] | None = None  # its rotary class's section when the config has none
    #: (config key, the value that turns its rotary on): its modeling code builds the rotary module
    #: only then (Zamba2's `use_mem_rope` True; Granite-4 hybrids' `position_embedding_type` "rope",
    #: where null or "nope" mean none). Any other value, or the key absent (its config class's default
    #: is off), and no layer applies positions.
    rope_switch: tuple[str, object] | None = None
    #: (config view) -> (rotated width, its field), where the head width is not the usual keys'
    head: Callable | None = None
    #: the key its config class maps `max_position_embeddings` to (DBRX: `max_seq_len`), which the
    #: length-dependent rope types read
    context_key: str = "max_position_embeddings"
    #: the layer kinds its modeling code builds attention for, where it builds a layer without
    #: positions for every other name (Zamba2: "hybrid"; any other entry becomes a Mamba layer)
    attention_kinds: frozenset[str] | None = None
    #: a checkpoint's `rotary_dim` its own modeling code rotates and its transformers config class
    #: does not read (MiniMax-Text-01: 64 of 128 head dims; transformers rotates all 128): posenc
    #: follows the checkpoint and the answer says what transformers computes instead
    unread_rotary_dim: bool = False


def _exaone4_nope(view, layer_type: str) -> bool:
    """Exaone-4: with a sliding window, full-attention layers skip RoPE (`if self.sliding_window is
    None or self.is_sliding`)."""
    return layer_type == "full_attention" and view.raw.get("sliding_window") is not None


def _full_attention_nope(view, layer_type: str) -> bool:
    """Only sliding-window layers rotate; full-attention layers use no positions (Cohere2, AFMoE, Flint)."""
    return layer_type == "full_attention"


def _zamba2_head(view) -> tuple[int, str]:
    """Zamba2's shared attention runs on the concatenated (2 x hidden) stream: its config class sets
    `attention_head_dim` = 2 * hidden_size // num_attention_heads (`head_dim` maps to it; the saved
    `kv_channels` is hidden // heads and is not what its rotary reads)."""
    if view.has("attention_head_dim"):
        return view.int("attention_head_dim"), view.field("attention_head_dim")
    return 2 * view.int("hidden_size") // view.int("num_attention_heads"), view.field("num_attention_heads")


INTERLEAVED = Modeling(layout="interleaved")
#: model_type -> its modeling facts; absent: Llama's (`rotate_half`, full rotary, every layer).
MODELING: dict[str, Modeling] = {
    "ernie4_5": INTERLEAVED,
    "ernie4_5_moe": INTERLEAVED,
    "helium": INTERLEAVED,
    "exaone4": Modeling(nope=_exaone4_nope),
    "exaone_moe": Modeling(nope=_exaone4_nope),
    "kolibri1": Modeling(nope=_exaone4_nope),
    "cohere2": Modeling(layout="interleaved", nope=_full_attention_nope),
    "cohere2_moe": Modeling(layout="interleaved", nope=_full_attention_nope),
    "afmoe": Modeling(nope=_full_attention_nope),
    "flint": Modeling(nope=_full_attention_nope),
    "lara_mini": Modeling(nope=_full_attention_nope),
    "bailing_hybrid": Modeling(layout="interleaved", context_key="model_max_length"),
    "openai_privacy_filter": INTERLEAVED,
    "minimax_m3_vl_text": Modeling(ignored_keys=("rotary_dim",)),
    "hrm_text": Modeling(unsupported="two rotary layer stacks (H and L modules) share one config"),
    "nanochat": Modeling(unsupported="its apply_rotary_pos_emb rotates the other way (sin negated)"),
    "deepseek_v4": Modeling(unsupported="its layers apply several rotations: the attention's q/kv, its "
                            "compressors' compressed keys, and the inverse one (sin negated) on the attention output"),
    "olmo3": Modeling(legacy_scaled=("full_attention",)),
    "qwen3_vl_text": Modeling(mrope="interleaved", mrope_default=(24, 20, 20)),
    "qwen3_vl_moe_text": Modeling(mrope="interleaved", mrope_default=(24, 20, 20)),
    "cosmos3_edge_text": Modeling(mrope="interleaved", mrope_default=(24, 20, 20)),
    "glm_moe_dsa": INTERLEAVED,
    "longcat_flash": INTERLEAVED,
    "dots3_note_text": INTERLEAVED,
    "embedding_gemma2_text": Modeling(nested_only=True),
    "qwen4_exp_text": Modeling(mrope="interleaved", mrope_default=(11, 11, 10)),
    "hy_v4_vl_text": Modeling(layout="interleaved", mrope="interleaved", mrope_default=(24, 20, 20)),
    "mistral_large4_text": INTERLEAVED,
    "qwen2_5_omni_text": Modeling(mrope="chunked", mrope_default=(16, 24, 24)),
    "paddleocr_vl_text": Modeling(mrope="chunked", mrope_default=(16, 24, 24)),
    "glm4v_text": Modeling(layout="interleaved", mrope="chunked", mrope_default=(8, 12, 12)),
    "glm_ocr_text": Modeling(layout="interleaved", mrope="chunked", mrope_default=(8, 12, 12)),
    "glm4v_moe_text": Modeling(mrope="chunked", mrope_default=(8, 12, 12)),
    "glm_image_text": Modeling(mrope="chunked", mrope_default=(8, 12, 12)),
    "qwen3_omni_moe_talker_code_predictor": Modeling(mrope="ignored"),
    "qwen2_5_omni_thinker": Modeling(mrope="chunked", mrope_default=(16, 24, 24)),
    "qwen2_5_omni_talker": Modeling(mrope="chunked", mrope_default=(16, 24, 24),
                                    ignored_keys=("position_id_per_seconds", "seconds_per_chunk")),
    "qwen3_omni_moe_talker_text": Modeling(mrope="interleaved", mrope_default=(24, 20, 20)),
    "llama4_text": Modeling(layout="interleaved", nope_interval=4),
    "smollm3": Modeling(nope_interval=4),
    "dbrx": Modeling(context_key="max_seq_len"),
    "minimax": Modeling(unread_rotary_dim=True),
    "granitemoehybrid": Modeling(rope_switch=("position_embedding_type", "rope")),
    "zamba2": Modeling(rope_switch=("use_mem_rope", True), head=_zamba2_head, attention_kinds=frozenset({"hybrid"})),
    "hunyuan_v1_dense": Modeling(ntk_alpha=True),
    "hunyuan_v1_moe": Modeling(ntk_alpha=True),
}


def modeling(model_type) -> Modeling:
    return MODELING.get(model_type, Modeling())
