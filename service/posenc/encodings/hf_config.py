"""Read the RoPE parameters out of a HF `config.json` (as a dict), the way transformers does.

Handles the spellings in the wild: `rope_parameters` (v5) or `rope_scaling` (legacy) with
`rope_type` or `type`; `rope_theta` at top level or inside the dict; GPT-NeoX
`rotary_pct`/`rotary_emb_base`; GPT-J `rotary_dim`/`n_embd`/`n_head`/`n_positions`;
DeepSeek `qk_rope_head_dim`; multimodal configs with a `text_config`.
"""

from __future__ import annotations

from ..args import as_float, as_int, as_mapping
from ..errors import PosencError
from ..limits import LIMITS

#: Models whose attention rotates (x_2i, x_2i+1) pairs rather than (x_i, x_i+d/2).
INTERLEAVED_MODEL_TYPES = {"gptj", "codegen", "roformer"}


def _first(config: dict, *keys):
    for key in keys:
        if config.get(key) is not None:
            return config[key]
    return None


def _first_key(config: dict, *keys) -> str | None:
    return next((key for key in keys if config.get(key) is not None), None)


def _head_dim(config: dict) -> int:
    explicit = _first_key(config, "qk_rope_head_dim", "head_dim")
    if explicit is not None:
        return as_int(config[explicit], f"config.{explicit}", minimum=1, maximum=LIMITS.max_dim)
    hidden_key = _first_key(config, "hidden_size", "n_embd", "d_model")
    heads_key = _first_key(config, "num_attention_heads", "n_head", "num_heads")
    if hidden_key is None or heads_key is None:
        raise PosencError("config.head_dim", "config has neither head_dim nor hidden_size and num_attention_heads")
    hidden = as_int(config[hidden_key], f"config.{hidden_key}", minimum=1, maximum=LIMITS.max_dim**2)
    heads = as_int(config[heads_key], f"config.{heads_key}", minimum=1, maximum=LIMITS.max_dim)
    if hidden % heads:
        raise PosencError(f"config.{heads_key}", f"hidden size {hidden} is not a multiple of {heads} heads")
    return hidden // heads


def _scaling_key(config: dict) -> str:
    return _first_key(config, "rope_parameters", "rope_scaling") or "rope_scaling"


def rope_spec_kwargs(config: dict) -> dict:
    if not isinstance(config, dict):
        raise PosencError("config", f"must be a JSON object, got {type(config).__name__}")
    if config.get("text_config") is not None:
        config = {**config, **as_mapping(config["text_config"], "config.text_config")}
    model_type = config.get("model_type")
    if model_type is not None and not isinstance(model_type, str):
        raise PosencError("config.model_type", f"must be a string, got {type(model_type).__name__}")
    scaling_key = _scaling_key(config)
    scaling = as_mapping(config.get(scaling_key), f"config.{scaling_key}")
    if scaling.get("rope_type", scaling.get("type")) in (None, "default"):
        scaling = {}  # may still carry rope_theta, read below
    head_dim = _head_dim(config)
    parameters = as_mapping(config.get("rope_parameters"), "config.rope_parameters")
    base = _first(scaling, "rope_theta") or _first(parameters, "rope_theta") \
        or _first(config, "rope_theta", "rotary_emb_base") or 10000.0
    prf = _first(parameters, "partial_rotary_factor") or _first(config, "partial_rotary_factor", "rotary_pct")
    if prf is None and config.get("rotary_dim") is not None:
        prf = as_int(config["rotary_dim"], "config.rotary_dim", minimum=1, maximum=head_dim) / head_dim
    interleaved = model_type in INTERLEAVED_MODEL_TYPES or config.get("rope_interleave") is True
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


def config_field(config: dict, spec_field: str) -> str:
    """The config.json key a RopeSpec field was read from (so an error names what the user wrote)."""
    if isinstance(config.get("text_config"), dict):
        config = {**config, **config["text_config"]}
    head, _, rest = spec_field.partition(".")
    if head == "scaling":
        return f"config.{_scaling_key(config)}" + (f".{rest}" if rest else "")
    sources = {
        "base": ("rope_theta", "rotary_emb_base"),
        "partial_rotary_factor": ("partial_rotary_factor", "rotary_pct", "rotary_dim"),
        "max_position_embeddings": ("max_position_embeddings", "n_positions"),
        "head_dim": ("qk_rope_head_dim", "head_dim"),
    }
    key = _first_key(config, *sources.get(spec_field, (spec_field,)))
    if key is None and spec_field in ("base", "original_max_position_embeddings"):  # read from the scaling dict
        inner = "rope_theta" if spec_field == "base" else spec_field
        return f"config.{_scaling_key(config)}.{inner}"
    return f"config.{key or spec_field}"


def rope_spec_from_config(cls, config: dict):
    """cls(**rope_spec_kwargs(config)), errors renamed to the config key at fault."""
    kwargs = rope_spec_kwargs(config)
    try:
        return cls(**kwargs)
    except PosencError as exc:
        raise PosencError(config_field(config, exc.field), exc.message) from None
