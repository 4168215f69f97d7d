"""The reader for model types without a family reader: the standard transformers keys only.

It knows `rope_parameters` / `rope_scaling` (flat, or nested per layer type as transformers 5
writes them), `rope_theta`, `partial_rotary_factor`, `head_dim` or `hidden_size` /
`num_attention_heads`, `max_position_embeddings`, `original_max_position_embeddings`,
`num_hidden_layers`, `layer_types`, and a multimodal `text_config` (read with its own
model_type's reader). Any other key whose name says it is about positions (rope, rotary,
position, alibi, relative_attention) is a family-specific knob this reader cannot honour:
it raises `PosencError` naming the key, or with `strict=False` warns and ignores it. A config
that names no RoPE parameter at all is refused too: nothing says the model uses RoPE.
"""

from __future__ import annotations

import re
import warnings

from ..errors import PosencError
from . import READERS, reader
from .fields import ConfigView, head_dim_from
from .positions import LayerPositions, ModelPositions
from .rope_params import Dims, RopeFamily, Sizes, build_spec, read_rope, rope_dict, top_level_defaults

STANDARD_KEYS = frozenset({
    "model_type", "hidden_size", "num_attention_heads", "head_dim", "num_hidden_layers",
    "max_position_embeddings", "original_max_position_embeddings", "rope_theta", "rope_scaling",
    "rope_parameters", "partial_rotary_factor", "layer_types", "text_config",
})
POSITION_WORDS = re.compile(r"rope|rotary|position|alibi|relative_attention", re.IGNORECASE)
_ROPE_KEYS = ("rope_parameters", "rope_scaling", "rope_theta")
#: transformers' RotaryEmbeddingConfigMixin defaults (base 1e4, rotate_half); sizes come from `_dims`.
GENERIC = RopeFamily(Sizes(0, 0, 0, 0))


def unknown_position_keys(view: ConfigView) -> list[str]:
    return [k for k in view.raw if k not in STANDARD_KEYS and isinstance(k, str) and POSITION_WORDS.search(k)]


def _check_keys(view: ConfigView, strict: bool) -> None:
    for key in unknown_position_keys(view):
        message = (f"is not a standard key and model type {view.raw.get('model_type')!r} has no family reader; "
                   "posenc will not guess what it does")
        if strict:
            raise PosencError(view.field(key), message)
        warnings.warn(f"{view.field(key)}: {message} (ignored: strict=False)", stacklevel=4)


def _dims(view: ConfigView) -> Dims:
    max_len = view.int("max_position_embeddings")
    layers = view.layers("num_hidden_layers", 0)
    if view.has("head_dim"):
        return Dims(view.int("head_dim"), view.field("head_dim"), layers, max_len,
                    view.field("max_position_embeddings"))
    if not (view.has("hidden_size") and view.has("num_attention_heads")):
        raise PosencError(view.field("head_dim"), "config has neither head_dim nor hidden_size and num_attention_heads")
    head_dim = head_dim_from(view, view.int("hidden_size"), view.int("num_attention_heads"), "num_attention_heads")
    return Dims(head_dim, view.field("num_attention_heads"), layers, max_len, view.field("max_position_embeddings"))


def _nested_layer_types(view: ConfigView, params: ConfigView | None, layers: int) -> tuple[str, ...] | None:
    """transformers 5's per-layer-type rope dicts: keys of rope_parameters that are layer types."""
    raw_types = view.raw.get("layer_types")
    if params is None or not isinstance(raw_types, list):
        return None
    names = {t for t in raw_types if isinstance(t, str)}
    if not any(isinstance(k, str) and k in names for k in params.raw):
        return None
    return view.str_list("layer_types", layers or len(raw_types), names)


@reader("__generic__")
def read_generic(config: dict, strict: bool) -> ModelPositions:
    view = ConfigView(config)
    _check_keys(view, strict)
    text = view.obj("text_config")
    if text is not None:
        return _read_text_config(view, text, strict)
    if not any(view.has(k) for k in _ROPE_KEYS):
        raise PosencError("config.model_type", f"model type {config.get('model_type')!r} has no family reader "
                          f"and its config names no RoPE parameter ({', '.join(_ROPE_KEYS)}); posenc cannot "
                          f"tell its position encoding (known families: {sorted(k for k in READERS if k[0] != '_')})")
    dims = _dims(view)
    model_type = str(config.get("model_type"))
    params = rope_dict(view)
    nested = _nested_layer_types(view, params, dims.layers)
    if nested is None:
        spec = read_rope(view, GENERIC, dims)
        return ModelPositions.single(model_type, "__generic__", spec, dims.layers)
    defaults = top_level_defaults(view, GENERIC)
    encodings = {}
    for layer_type in dict.fromkeys(nested):
        sub = params.obj(layer_type)
        if sub is None:
            continue  # a null entry: those layers use no position encoding
        spec = build_spec(sub, theta=defaults.theta, prf=defaults.prf, dims=dims, original=defaults.original,
                          layout=GENERIC.layout)
        indices = tuple(i for i, t in enumerate(nested) if t == layer_type)
        encodings[layer_type] = LayerPositions(layer_type, spec, indices, spec.layout)
    return ModelPositions(model_type, "__generic__", encodings)


def _read_text_config(view: ConfigView, text: ConfigView, strict: bool) -> ModelPositions:
    """A multimodal wrapper: the language model's positions are its text_config's (one level deep)."""
    if text.has("text_config"):
        raise PosencError(text.field("text_config"), "a text_config inside a text_config is not a model config")
    inner = text.raw
    if "model_type" in inner and not isinstance(inner["model_type"], str):
        raise PosencError(text.field("model_type"), f"must be a string, got {inner['model_type']!r}")
    read = READERS.get(inner.get("model_type"), read_generic)
    try:
        return read(inner, strict)
    except PosencError as exc:
        field = exc.field.replace("config", text.path, 1) if exc.field.startswith("config") else exc.field
        raise PosencError(field, exc.message) from None
