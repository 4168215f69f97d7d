"""Reading a family's RoPE out of its config the way transformers 5.24 standardises it.

transformers turns every spelling (`rope_scaling` / `rope_parameters`, `type` / `rope_type`,
a top-level `rope_theta` or a family's own name for it) into one flat dict per layer type
(`RotaryEmbeddingConfigMixin.convert_rope_params_to_dict` + `standardize_rope_params`):

* the dict is `rope_scaling` when that is a non-empty object, else `rope_parameters`;
* `rope_theta` / `partial_rotary_factor` inside it win over the top-level values, which win
  over the family's defaults (its `default_theta`, its `__post_init__` setdefaults);
* for llama3 / yarn / longrope, a top-level `original_max_position_embeddings` wins over the
  dict's own, which defaults to `max_position_embeddings`.

`RopeFamily` holds one family's defaults (read from its configuration_*.py); `read_rope`
applies the rules and builds a `RopeSpec`, renaming the spec's error fields to the config
keys they came from, so `{"rope_scaling": {"factor": "x"}}` fails as `config.rope_scaling.factor`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..encodings import RopeSpec
from ..errors import PosencError
from .fields import ConfigView, head_dim_from
from .positions import ModelPositions

#: rope types that carry an original (pretraining) context length.
_NEEDS_ORIGINAL = ("llama3", "yarn", "longrope")


@dataclass(frozen=True)
class Sizes:
    """A family's config-class defaults for the sizes RoPE depends on, and the keys it reads them from."""

    hidden_size: int
    num_attention_heads: int
    num_hidden_layers: int
    max_position_embeddings: int
    keys: tuple[str, str, str, str] = ("hidden_size", "num_attention_heads", "num_hidden_layers",
                                       "max_position_embeddings")

    def read(self, view: ConfigView) -> tuple[int, int, int, int]:
        hidden_key, heads_key, layers_key, max_key = self.keys
        return (view.int(hidden_key, self.hidden_size), view.int(heads_key, self.num_attention_heads),
                view.layers(layers_key, self.num_hidden_layers), view.int(max_key, self.max_position_embeddings))


#: head_dim rules: an int is the config class's default for an absent `head_dim`; a (key, default)
#: pair reads another key (DeepSeek's qk_rope_head_dim); HIDDEN_OVER_HEADS uses `head_dim` when
#: given, else hidden // heads; SPLIT ignores any `head_dim` key because the attention always
#: splits hidden_size (Falcon's read-only property, GPT-NeoX, StableLM, ModernBERT).
HIDDEN_OVER_HEADS = "hidden_over_heads"
SPLIT = "split"


@dataclass(frozen=True)
class RopeFamily:
    """How one family's modeling code reads its rotary embedding."""

    sizes: Sizes
    default_theta: float = 10_000.0
    head_dim: int | str | tuple[str, int] = HIDDEN_OVER_HEADS
    default_prf: float | None = None  # None: no partial rotary unless the config says so
    theta_keys: tuple[str, ...] = ("rope_theta",)  # top-level spellings of the base, first wins
    prf_keys: tuple[str, ...] = ("partial_rotary_factor",)
    layout: str = "half"
    default_original: int | None = None  # Phi-3's config class always has original_max_position_embeddings
    rope_type_aliases: dict = field(default_factory=dict)  # Phi-3 reads legacy "su" / "yarn" as longrope


@dataclass(frozen=True)
class Dims:
    """The sizes a reader has resolved, and the config keys they came from (for error fields)."""

    head_dim: int
    head_dim_field: str
    layers: int
    max_position_embeddings: int
    max_field: str


def read_dims(view: ConfigView, family: RopeFamily) -> Dims:
    hidden, heads, layers, max_len = family.sizes.read(view)
    _, heads_key, _, max_key = family.sizes.keys
    rule = family.head_dim
    if isinstance(rule, tuple):  # (key, default): the rotary slice has its own size key
        key, default = rule
        return Dims(view.int(key, default), view.field(key), layers, max_len, view.field(max_key))
    if rule != SPLIT and view.has("head_dim"):
        return Dims(view.int("head_dim"), view.field("head_dim"), layers, max_len, view.field(max_key))
    if isinstance(rule, int):
        if "head_dim" in view.raw:  # an explicit null: the config class (a strict dataclass) rejects it
            raise PosencError(view.field("head_dim"), f"must be an integer (default {rule}), got null")
        return Dims(rule, view.field("head_dim"), layers, max_len, view.field(max_key))
    return Dims(head_dim_from(view, hidden, heads, heads_key), view.field(heads_key), layers, max_len,
                view.field(max_key))


def rope_dict(view: ConfigView) -> ConfigView | None:
    """`rope_scaling` when it is a non-empty object, else `rope_parameters` (transformers' `or`)."""
    scaling = view.obj("rope_scaling")
    if scaling is not None and scaling.raw:
        return scaling
    return view.obj("rope_parameters")


@dataclass(frozen=True)
class Default:
    """A value a rope dict falls back to, and the config key it came from."""

    value: object
    field: str


def top_level(view: ConfigView, keys: tuple[str, ...], default, default_field: str) -> Default:
    key = view.first_key(*keys)
    return Default(view.raw[key], view.field(key)) if key else Default(default, default_field)


def build_spec(params: ConfigView | None, *, theta: Default, prf: Default | None, dims: Dims,
               original: Default | None, layout: str, aliases: dict | None = None,
               mrope: dict | None = None) -> RopeSpec:
    """A RopeSpec from one (standardised) rope dict; spec errors renamed to config fields.
    `mrope`: RopeSpec's mrope_section / mrope_interleaved keywords (the M-RoPE families)."""
    raw = dict(params.raw) if params is not None else {}
    path = params.path if params is not None else "config.rope_parameters"
    rope_type = raw.get("rope_type", raw.get("type", "default"))
    type_field = f"{path}.{'rope_type' if 'rope_type' in raw else 'type'}"
    if not isinstance(rope_type, str):
        raise PosencError(type_field, f"must be a string, got {rope_type!r}")
    rope_type = (aliases or {}).get(rope_type, rope_type)
    fields = {"mrope_section": f"{path}.mrope_section", "base": theta.field, "head_dim": dims.head_dim_field, "max_position_embeddings": dims.max_field,
              "scaling.rope_type": type_field}
    base = theta.value
    if raw.get("rope_theta") is not None:
        base, fields["base"] = raw["rope_theta"], f"{path}.rope_theta"
    factor = 1.0 if prf is None else prf.value
    if raw.get("partial_rotary_factor") is not None:
        factor, fields["partial_rotary_factor"] = raw["partial_rotary_factor"], f"{path}.partial_rotary_factor"
    elif prf is not None:
        fields["partial_rotary_factor"] = prf.field
    original_value = None
    if rope_type in _NEEDS_ORIGINAL:
        if original is not None:
            original_value, fields["original_max_position_embeddings"] = original.value, original.field
        elif raw.get("original_max_position_embeddings") is not None:
            original_value = raw["original_max_position_embeddings"]
            fields["original_max_position_embeddings"] = f"{path}.original_max_position_embeddings"
        else:
            original_value, fields["original_max_position_embeddings"] = dims.max_position_embeddings, dims.max_field
    scaling = {k: v for k, v in raw.items() if k not in ("rope_type", "type", "original_max_position_embeddings")}
    scaling["rope_type"] = rope_type
    try:
        return RopeSpec(dims.head_dim, base=base, partial_rotary_factor=factor, scaling=scaling,
                        max_position_embeddings=dims.max_position_embeddings,
                        original_max_position_embeddings=original_value, layout=layout, **(mrope or {}))
    except PosencError as exc:
        raise PosencError(_config_field(exc.field, fields, path), exc.message) from None


def _config_field(spec_field: str, fields: dict, path: str) -> str:
    if spec_field in fields:
        return fields[spec_field]
    if spec_field.startswith("scaling."):
        return f"{path}.{spec_field.removeprefix('scaling.')}"
    return fields.get(spec_field.split(".")[0], f"{path}.{spec_field}")


@dataclass(frozen=True)
class TopLevel:
    """What a rope dict falls back to: the config's top-level keys, else the family's defaults."""

    theta: Default
    prf: Default | None  # None: no partial rotary unless the rope dict says so
    original: Default | None  # None: the rope dict's own, else max_position_embeddings


def top_level_defaults(view: ConfigView, family: RopeFamily) -> TopLevel:
    theta = top_level(view, family.theta_keys, family.default_theta, view.field(family.theta_keys[0]))
    prf = None
    if view.first_key(*family.prf_keys) or family.default_prf is not None:
        prf = top_level(view, family.prf_keys, family.default_prf, view.field(family.prf_keys[0]))
    original = None
    if view.has("original_max_position_embeddings") or family.default_original is not None:
        original = top_level(view, ("original_max_position_embeddings",), family.default_original,
                             view.field("original_max_position_embeddings"))
    return TopLevel(theta, prf, original)


def read_rope(view: ConfigView, family: RopeFamily, dims: Dims | None = None, *, layout: str | None = None) -> RopeSpec:
    """The one RoPE of a single-RoPE family (Llama, Qwen, Mistral, ...); `layout` overrides the
    family's for readers that decide it from another key (DeepSeek-V3's rope_interleave)."""
    dims = dims or read_dims(view, family)
    defaults = top_level_defaults(view, family)
    return build_spec(rope_dict(view), theta=defaults.theta, prf=defaults.prf, dims=dims, original=defaults.original,
                      layout=layout or family.layout, aliases=family.rope_type_aliases)


def single_rope_reader(family: RopeFamily):
    """A reader for a family whose every layer uses the one RoPE `read_rope` finds."""

    def read(config: dict, strict: bool) -> ModelPositions:
        view = ConfigView(config)
        dims = read_dims(view, family)
        spec = read_rope(view, family, dims)
        return ModelPositions.single(config["model_type"], config["model_type"], spec, dims.layers)

    return read
