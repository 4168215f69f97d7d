"""Read the RoPE parameters out of a HF `config.json` (as a dict), the way transformers does.

Handles the spellings in the wild: `rope_parameters` (v5) or `rope_scaling` (legacy) with
`rope_type` or `type`; `rope_theta` at top level or inside the dict; GPT-NeoX
`rotary_pct`/`rotary_emb_base`; GPT-J `rotary_dim`/`n_embd`/`n_head`/`n_positions`;
DeepSeek `qk_rope_head_dim`; multimodal configs with a `text_config`.
"""

from __future__ import annotations

from ..errors import PosencError

#: Models whose attention rotates (x_2i, x_2i+1) pairs rather than (x_i, x_i+d/2).
INTERLEAVED_MODEL_TYPES = {"gptj", "codegen", "roformer"}


def _first(config: dict, *keys):
    for key in keys:
        if config.get(key) is not None:
            return config[key]
    return None


def _head_dim(config: dict) -> int:
    explicit = _first(config, "qk_rope_head_dim", "head_dim")
    if explicit is not None:
        return explicit
    hidden = _first(config, "hidden_size", "n_embd", "d_model")
    heads = _first(config, "num_attention_heads", "n_head", "num_heads")
    if hidden is None or heads is None:
        raise PosencError("config.head_dim", "config has neither head_dim nor hidden_size and num_attention_heads")
    if not isinstance(hidden, int) or not isinstance(heads, int) or heads < 1 or hidden % heads:
        raise PosencError("config.num_attention_heads", f"hidden size {hidden!r} is not a multiple of {heads!r} heads")
    return hidden // heads


def rope_spec_kwargs(config: dict) -> dict:
    if not isinstance(config, dict):
        raise PosencError("config", f"must be a JSON object, got {type(config).__name__}")
    if isinstance(config.get("text_config"), dict):
        config = {**config, **config["text_config"]}
    scaling = _first(config, "rope_parameters", "rope_scaling") or {}
    if not isinstance(scaling, dict):
        raise PosencError("config.rope_scaling", f"must be an object, got {scaling!r}")
    scaling = dict(scaling)
    if scaling.get("rope_type", scaling.get("type")) in (None, "default"):
        scaling = {}  # may still carry rope_theta, read below
    head_dim = _head_dim(config)
    base = _first(scaling, "rope_theta") or _first(config.get("rope_parameters") or {}, "rope_theta") \
        or _first(config, "rope_theta", "rotary_emb_base") or 10000.0
    prf = _first(config.get("rope_parameters") or {}, "partial_rotary_factor") \
        or _first(config, "partial_rotary_factor", "rotary_pct")
    if prf is None and config.get("rotary_dim") is not None:
        prf = config["rotary_dim"] / head_dim
    interleaved = config.get("model_type") in INTERLEAVED_MODEL_TYPES or bool(config.get("rope_interleave"))
    return {
        "head_dim": head_dim,
        "base": base,
        "partial_rotary_factor": 1.0 if prf is None else prf,
        "scaling": scaling or None,
        "max_position_embeddings": _first(config, "max_position_embeddings", "n_positions"),
        # A top-level value (Phi-3) overrides the one inside the scaling dict, as in HF.
        "original_max_position_embeddings": config.get("original_max_position_embeddings"),
        "layout": "interleaved" if interleaved else "half",
    }
