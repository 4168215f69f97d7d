"""The reader for model types without a family reader: mechanisms, wherever a config uses them.

It reads `rope_parameters` / `rope_scaling` (flat, or nested per layer type as transformers 5
writes them), `rope_theta`, the head and rotary widths (`mechanisms.head_dim`,
`mechanisms.partial_factor`), `max_position_embeddings`, `original_max_position_embeddings`,
which layers apply positions (`mechanisms.layer_types`), and a composite config's language
model (`text_config`, `thinker_config`, `llm_config`: read with its own model_type's reader).
What only the modeling code knows (the pairing, NoPE rules) comes from `modeling.MODELING`.
Any other key whose name says it is about positions (rope, rotary, position, alibi,
relative_attention) is a mechanism this reader does not read: it raises `PosencError` naming
the key, or with `strict=False` warns and ignores it. A config that names no RoPE parameter
at all is refused too: nothing says the model uses RoPE.

It reads the config as the model type's transformers config class makes it: what the class fills
in for keys the config leaves out comes from checked.json (`class_defaults.with_class_defaults`).
Where the class drops a value the config states that the model's own code reads (DBRX's
attn_config.rope_theta, MiniMax's rotary_dim), posenc takes the config's and the answer's
`notes` say what transformers computes instead.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import replace

from ..errors import PosencError
from . import READERS, noted, reader
from .checked import gate, positionless, read_as, record
from .class_defaults import class_facts, with_class_defaults
from .config_keys import renamed
from .fields import ConfigView
from .mechanisms import (
    ATTENTION_TYPES,
    UNSCALED,
    head_dim,
    layer_types,
    layout,
    num_layers,
    partial_factor,
    theta_group,
)
from .modeling import Modeling, modeling
from .positions import LayerPositions, ModelPositions
from .rope_params import Default, Dims, build_spec, rope_dict

#: Keys this reader reads (or that only size the model), besides the rope dicts' contents.
STANDARD_KEYS = frozenset({
    "model_type", "hidden_size", "num_attention_heads", "head_dim", "num_hidden_layers", "num_layers",
    "max_position_embeddings", "original_max_position_embeddings", "rope_theta", "rope_scaling",
    "rope_parameters", "partial_rotary_factor", "layer_types", "text_config", "thinker_config", "llm_config",
    "qk_rope_head_dim", "kv_channels", "rotary_dim", "rotary_pct", "rope_pct", "no_rope_layers",
    "layer_rope_theta", "no_rope_layer_interval", "rope_interleave", "position_embedding_type", "rope_scaling_layers",
})
POSITION_WORDS = re.compile(r"rope|rotary|position|alibi|relative_attention", re.IGNORECASE)
_ROPE_KEYS = ("rope_parameters", "rope_scaling", "rope_theta")
#: Where a composite config keeps its language model, in the order transformers nests them.
NESTED = ("thinker_config", "text_config", "llm_config")


def unknown_position_keys(view: ConfigView) -> list[str]:
    return [k for k in view.raw if k not in STANDARD_KEYS and isinstance(k, str) and POSITION_WORDS.search(k)]


def _check_keys(view: ConfigView, strict: bool) -> None:
    facts = modeling(view.raw.get("model_type"))
    for key in unknown_position_keys(view):
        if key in facts.ignored_keys or (facts.rope_switch and key == facts.rope_switch[0]):
            continue
        message = (f"is a position mechanism posenc does not read for model type {view.raw.get('model_type')!r}; "
                   "posenc will not guess what it does")
        if strict:
            raise PosencError(view.field(key), message)
        warnings.warn(f"{view.field(key)}: {message} (ignored: strict=False)", stacklevel=4)


@reader("__generic__")
def read_generic(config: dict, strict: bool) -> ModelPositions:
    view = ConfigView(config)
    facts = modeling(config.get("model_type"))
    if facts.unsupported:
        raise PosencError("config.model_type", f"{config.get('model_type')!r}: {facts.unsupported}; posenc "
                          "does not reproduce it")
    if positionless(config.get("model_type")):  # Jamba, Mamba: no module of it reads a position key
        return _without_positions(with_class_defaults(view, facts), str(config.get("model_type")), "config.model_type")
    _check_keys(view, strict)
    for key in NESTED:
        inner = view.obj(key)
        if inner is not None:
            return _read_nested(_sub_config(config, key, inner), strict)
    view, notes = _attn_config_base(view)
    view = with_class_defaults(view, facts)
    if facts.rope_switch is not None:
        key, on = facts.rope_switch
        if view.raw.get(key) != on:  # its modeling code builds no rotary module: no layer has positions
            return _without_positions(view, str(config.get("model_type")), view.field(key))
    kind = view.raw.get("position_embedding_type", "rope")
    if kind != "rope":
        raise PosencError(view.field("position_embedding_type"), f"is {kind!r}: posenc reads this config's "
                          "positions only when it is 'rope'")
    if not any(view.has(k) for k in _ROPE_KEYS):
        raise PosencError("config.model_type", f"model type {config.get('model_type')!r} has no family reader "
                          f"and its config names no RoPE parameter ({', '.join(_ROPE_KEYS)}); posenc cannot "
                          f"tell its position encoding (known families: {sorted(k for k in READERS if k[0] != '_')})")
    model = read_mechanisms(view, str(config.get("model_type")), facts)
    notes += _unread_rotary_dim(view, facts, model) + _temperature_tuning(view, model)
    return replace(model, notes=model.notes + notes) if notes else model


def _attn_config_base(view: ConfigView) -> tuple[ConfigView, tuple[str, ...]]:
    """DBRX's config.json keeps its base in `attn_config.rope_theta`, which DBRX's own modeling code
    reads; transformers 5's DbrxConfig does not carry it into rope_parameters, which it gives its
    default base, and its rotary embedding reads that. posenc takes attn_config's, in the raw
    form and in the to_dict() form (where both are present) alike, and says which transformers uses."""
    attn = view.obj("attn_config")
    if attn is None or not attn.has("rope_theta"):
        return view, ()
    theta = attn.float("rope_theta", exclusive_minimum=0.0)
    params = rope_dict(view)
    where = params if params is not None and params.has("rope_theta") else view
    given = where.float("rope_theta", exclusive_minimum=0.0)
    raw = {**view.raw, "rope_theta": theta}
    if params is not None and "rope_theta" in params.raw:
        raw[params.path.rsplit(".", 1)[1]] = {**params.raw, "rope_theta": theta}
    if given == theta:
        return ConfigView(raw, view.path), ()
    found = class_facts(view.raw.get("model_type")) or {}
    used = given if given is not None else found.get("defaults", {}).get("rope_theta", 10_000.0)
    note = (f"base {theta:g} is attn_config.rope_theta, where DBRX's config.json keeps it and DBRX's own modeling "
            f"code reads it; transformers {record()['transformers']}'s {found.get('class', 'config class')} does not "
            f"carry it into rope_parameters ({'which it gives its default base' if given is None else 'whose rope_theta is'}"
            f" {used:g}), so transformers' own model computes cos/sin with base {used:g}")
    return ConfigView(raw, view.path), (note,)


def _unread_rotary_dim(view: ConfigView, facts: Modeling, model: ModelPositions) -> tuple[str, ...]:
    """MiniMax-Text-01's rotary_dim (64 of 128 head dims), which MiniMax's own modeling code rotates
    and transformers' MiniMax config class does not read: posenc follows the checkpoint and says
    what transformers computes instead."""
    if not facts.unread_rotary_dim or not view.has("rotary_dim"):
        return ()
    entry = next(iter(model.of_kind("rope").values()), None)
    if entry is None or entry.spec.rotary_dim == entry.spec.head_dim:
        return ()
    found = class_facts(view.raw.get("model_type")) or {}
    note = (f"rotary_dim {entry.spec.rotary_dim}: posenc rotates the first {entry.spec.rotary_dim} of the "
            f"{entry.spec.head_dim} head dims, as the model's own modeling code does; transformers "
            f"{record()['transformers']}'s {found.get('class', 'config class')} does not read rotary_dim, so its "
            f"model rotates all {entry.spec.head_dim}")
    return (note,)


def _temperature_tuning(view: ConfigView, model: ModelPositions) -> tuple[str, ...]:
    """Llama-4's NoPE layers take no rotation but, with `attn_temperature_tuning` (its config class's
    default), scale each query by a function of its position: a position signal posenc does not
    serve, which "no positions" alone would hide from someone reimplementing the model."""
    if not model.without or view.raw.get("attn_temperature_tuning") is not True:
        return ()
    floor, scale = view.raw.get("floor_scale"), view.raw.get("attn_scale")
    return (f"layers {list(model.without)} apply no rotation but scale each query at position p by "
            f"log1p(floor((p + 1) / {floor})) * {scale} + 1 (attn_temperature_tuning, floor_scale, attn_scale): "
            "a position-dependent temperature of the attention, not an encoding posenc computes",)


def read_mechanisms(view: ConfigView, model_type: str, facts: Modeling) -> ModelPositions:
    """Every layer's RoPE from the mechanisms the config uses."""
    layers, _ = num_layers(view)
    head, head_field = head_dim(view, facts)
    context = facts.context_key
    dims = Dims(head, head_field, layers, view.int(context), view.field(context))
    per_layer = layer_types(view, layers, facts)
    prf = partial_factor(view, head, facts)
    theta = Default(view.raw["rope_theta"], view.field("rope_theta")) if view.has("rope_theta") \
        else Default(10_000.0, view.field("rope_theta"))
    original = Default(view.raw["original_max_position_embeddings"], view.field("original_max_position_embeddings")) \
        if view.has("original_max_position_embeddings") else None
    pairing = layout(view, facts)
    params = rope_dict(view)
    nested = _nested_dicts(view, params, per_layer)
    specs, notes = {}, {}
    if nested is None and facts.nested_only and len({n for n in per_layer if n is not None}) > 1:
        raise PosencError(view.field(view.first_key("rope_theta", "rope_scaling") or "rope_parameters"),
                          f"is flat, but model type {model_type!r} gives each layer "
                          "type its own default RoPE (a legacy rope_theta sets only some): posenc reads this "
                          "family's rope_parameters only nested per layer type")
    if nested is not None:  # a null entry: layers of that type apply no positions (Beam's full attention)
        per_layer = [None if n in nested and nested[n] is None else n for n in per_layer]
    per_layer, widths = _per_layer_heads(view, per_layer, head, head_field)
    for name in dict.fromkeys(n for n in per_layer or ["default"] if n is not None):
        kind, (width, full) = name.split(WIDER)[0], widths.get(name, (head, None))
        sub, base = _rope_params_for(view, kind, params, nested, facts, theta)
        alpha = facts.ntk_alpha and sub is not None and sub.raw.get("alpha") is not None
        sub, unread = _ntk_alpha(sub) if alpha else (sub, ())
        sub, mrope = _mrope(sub, facts, view)
        sub, notes[name] = _outside_rotation(sub, view)
        notes[name] += unread
        sub = _mla_factor(sub, prf, view, width, head_field, full)
        with renamed({f"{sub.path}.factor": f"{sub.path}.alpha"} if alpha else {}):  # the ntk factor is the alpha
            specs[name] = build_spec(sub, theta=base, prf=None if prf is None else Default(*prf),
                                     dims=replace(dims, head_dim=width), original=original, layout=pairing, mrope=mrope)
    if nested is None and len(set(specs.values())) == 1:  # one RoPE shared by every layer that has positions
        per_layer = ["default" if n is not None else None for n in per_layer]
        specs, notes = {"default": next(iter(specs.values()))}, {"default": next(iter(notes.values()))}
    encodings = {}
    if not per_layer:  # no layer count: the one RoPE, layers unlisted
        spec = specs["default"]
        return ModelPositions(model_type, "__generic__",
                              {"default": LayerPositions("default", spec, (), spec.layout, notes["default"])})
    none = tuple(i for i, n in enumerate(per_layer) if n is None)
    for name, spec in specs.items():
        indices = tuple(i for i, n in enumerate(per_layer) if n == name)
        extra = (f"layers {list(none)} apply no positions",) if none else ()
        encodings[name] = LayerPositions(name, spec, indices, spec.layout, notes[name] + extra)
    return ModelPositions(model_type, "__generic__", encodings, without=none)


def _without_positions(view: ConfigView, model_type: str, why_field: str) -> ModelPositions:
    """The answer for a config that turns positions off: every layer has none (needs the layer count)."""
    layers, _ = num_layers(view)
    if not layers:
        raise PosencError(why_field, "turns positions off, but the config gives no layer count to say it of")
    return ModelPositions.none(model_type, "__generic__", layers)


WIDER = " with head_dim "  # the name of a layer type's layers whose head_dim a per-layer override changes


def _per_layer_heads(view: ConfigView, per_layer: list, head: int, head_field: str) -> tuple[list, dict]:
    """transformers' heterogeneous configs (`per_layer_config`: {layer index: overrides}, Gemma-4's
    full-attention layers with a wider `head_dim`, Dots-3's sliding layers with their own MLA
    widths): (the per-layer names, with the layers whose widths differ from the rest of their type
    named apart, {name: (rotated head width, MLA head_dim override or None)}). An override of any
    other position key is refused; one of a size that does not touch the rotation is not."""
    raw = view.raw.get("per_layer_config")
    if raw is None:
        return per_layer, {}
    field = view.field("per_layer_config")
    if not isinstance(raw, dict):
        raise PosencError(field, "must be an object mapping layer indices to per-layer overrides")
    mla = head_field.endswith("qk_rope_head_dim")
    heads: list = [(head, None)] * len(per_layer)
    for key, over in raw.items():
        index = int(key) if isinstance(key, str) and key.isdigit() else None
        if index is None or not isinstance(over, dict):
            raise PosencError(f"{field}.{key}", "must be a layer index with an object of overrides")
        if index >= len(per_layer):
            continue  # no such layer: it overrides nothing
        for name, value in over.items():
            rotated = name == ("qk_rope_head_dim" if mla else "head_dim")
            if not rotated and not (mla and name == "head_dim") and (
                    name in ("qk_rope_head_dim", "kv_channels", "rotary_dim", "layer_types") or POSITION_WORDS.search(name)):
                raise PosencError(f"{field}.{key}.{name}", "a per-layer override of a position key: posenc does "
                                  "not read it")
            if (rotated or name == "head_dim") and (
                    not isinstance(value, int) or isinstance(value, bool) or value < 2 or value % 2):
                raise PosencError(f"{field}.{key}.{name}", f"must be an even integer >= 2, got {value!r}")
            if rotated:
                heads[index] = (value, heads[index][1])
            elif mla and name == "head_dim":
                heads[index] = (heads[index][0], value)
    names, widths = list(per_layer), {}
    for kind in dict.fromkeys(n for n in per_layer if n is not None):
        found = {heads[i] for i, n in enumerate(per_layer) if n == kind}
        for i, n in enumerate(per_layer):
            if n == kind:
                names[i] = kind if len(found) == 1 or heads[i] == (head, None) else f"{kind}{WIDER}{heads[i][0]}" + (
                    f" of {heads[i][1]}" if heads[i][1] else "")
                widths[names[i]] = heads[i]
    return names, widths


def _nested_dicts(view: ConfigView, params: ConfigView | None, per_layer: list) -> dict | None:
    """transformers 5's rope_parameters nested per layer type ({"full_attention": {...}, ...})."""
    raw = view.raw.get("layer_types")
    if params is None or not isinstance(raw, list):
        return None
    names = set(raw)
    keys = [k for k in params.raw if k in names]
    if not keys:
        return None
    others = [k for k in params.raw if k not in names and k not in ATTENTION_TYPES]  # unused types may stay
    if others:
        raise PosencError(params.field(others[0]), "rope_parameters nests per layer type; a flat key beside "
                          "them is not read by the modeling code")
    return {k: params.obj(k) for k in keys}


def _rope_params_for(view, name, params, nested, facts: Modeling, theta: Default):
    """(the rope dict, the base default) of the layers named `name`."""
    if name.startswith("rope_theta_"):  # layer_rope_theta: this base over the rope dict's, its rope type
        index = next(i for i, t in enumerate(view.raw["layer_rope_theta"]) if t and theta_group(t) == name)
        if params is not None and "rope_theta" in params.raw:
            params = ConfigView({k: v for k, v in params.raw.items() if k != "rope_theta"}, params.path)
        return params, Default(view.raw["layer_rope_theta"][index], view.field(f"layer_rope_theta[{index}]"))
    if name == UNSCALED:  # plain RoPE with the dict's own base and rotary fraction
        kept = {k: params.raw[k] for k in ("rope_theta", "partial_rotary_factor") if params is not None and k in params.raw}
        return ConfigView({"rope_type": "default", **kept}, params.path if params else view.field("rope_parameters")), theta
    if nested is not None:
        if name not in nested:
            raise PosencError(view.field("rope_parameters"), f"has no entry for layer type {name!r}")
        return nested[name], theta
    if facts.legacy_scaled is not None and name not in facts.legacy_scaled:
        return None, theta  # a legacy rope_scaling scales only the family's scaled layer types
    return params, theta


def _mrope(params: ConfigView | None, facts: Modeling, view: ConfigView):
    """(the rope dict without its M-RoPE keys, RopeSpec's M-RoPE keywords) for the M-RoPE families."""
    raw = dict(params.raw) if params is not None else {}
    section = raw.pop("mrope_section", None)
    raw.pop("mrope_interleaved", None)  # the modeling code decides (Qwen3-VL interleaves whatever it says)
    if facts.mrope == "ignored":
        return (None if params is None else ConfigView(raw, params.path)), None
    if facts.mrope is None:
        if section is not None:
            raise PosencError(f"{params.path}.mrope_section", f"M-RoPE as model type {view.raw.get('model_type')!r} "
                              "applies it is a mechanism posenc does not read")
        return params, None
    section = section if section is not None else list(facts.mrope_default)
    path = params.path if params is not None else view.field("rope_parameters")
    return ConfigView(raw, path), {"mrope_section": section, "mrope_interleaved": facts.mrope == "interleaved"}


def _outside_rotation(params: ConfigView | None, view: ConfigView) -> tuple[ConfigView | None, tuple[str, ...]]:
    """Keys of a rope dict that do not change cos/sin, moved out with a note: Ministral-3's
    `llama_4_scaling_beta` (the attention scales q by 1 + beta * log(1 + floor(p / original)))
    and a copy of the top-level `max_position_embeddings` (which YaRN reads from the config)."""
    if params is None:
        return None, ()
    raw, notes = dict(params.raw), ()
    if "max_position_embeddings" in raw:
        if raw.pop("max_position_embeddings") != view.raw.get("max_position_embeddings"):
            raise PosencError(params.field("max_position_embeddings"), "differs from the config's "
                              "max_position_embeddings, which is the one the rotary code reads; posenc will not guess")
    beta = raw.pop("llama_4_scaling_beta", None)
    if beta is not None:
        notes = (f"the attention also scales q by 1 + {beta:g} * log(1 + floor(position / "
                 "original_max_position_embeddings)) (llama_4_scaling_beta): not part of cos/sin",)
    return ConfigView(raw, params.path), notes


def _mla_factor(params: ConfigView | None, prf, view: ConfigView, head: int, head_field: str,
                full: int | None = None) -> ConfigView | None:
    """MLA: transformers sizes the rotary from `head_dim` x `partial_rotary_factor` and applies it
    to the `qk_rope_head_dim`-wide q_pe / k_pe. Where `head_dim` is wider (Mistral-4: nope + rope,
    with the factor rope / head_dim), the factor is re-expressed on the rotary part; without a
    `head_dim` the width a factor scales is the family's (DeepSeek's rope part, Mistral-4's whole
    head), which posenc does not guess. `full`: a per-layer override of head_dim."""
    raw = dict(params.raw) if params is not None else {}
    if not head_field.endswith("qk_rope_head_dim") or (raw.get("partial_rotary_factor") is None and prf is None):
        return params
    path = params.path if params is not None else view.field("rope_parameters")
    field = f"{path}.partial_rotary_factor" if raw.get("partial_rotary_factor") is not None else prf[1]
    if full is None and not view.has("head_dim"):
        raise PosencError(field, "with qk_rope_head_dim and no head_dim, the width this factor scales is the "
                          "family's (the rope part or the whole head): posenc will not guess")
    factor = raw["partial_rotary_factor"] if raw.get("partial_rotary_factor") is not None else prf[0]
    width = (full or view.int("head_dim")) * factor
    if width > head or width != int(width):
        raise PosencError(field, f"head_dim x partial_rotary_factor = {width:g} rotary dims do not fit the "
                          f"qk_rope_head_dim ({head}) the attention rotates")
    return ConfigView({**raw, "partial_rotary_factor": width / head}, path)


#: keys of Hunyuan's rope dict its NTK-alpha rotary never reads (`compute_ntk_alpha_rope_parameters`, as
#: Tencent's own DynamicNTKAlphaRotaryEmbedding: base * alpha^(d/(d-2)), nothing else); its real
#: config.json carries them beside the alpha (Hunyuan-7B, Hunyuan-A13B: beta_fast 32, beta_slow 1, ...)
NTK_ALPHA_UNREAD = ("beta_fast", "beta_slow", "factor", "mscale", "mscale_all_dim")


def _ntk_alpha(params: ConfigView) -> tuple[ConfigView, tuple[str, ...]]:
    """Hunyuan's fixed-alpha NTK ("dynamic" with an `alpha`): posenc's static "ntk" with factor
    alpha, and a note naming the dict's keys that rotary does not read."""
    unread = [k for k in NTK_ALPHA_UNREAD if k in params.raw]
    raw = {k: v for k, v in params.raw.items() if k not in ("alpha", "type", *NTK_ALPHA_UNREAD)}
    note = (f"{', '.join(f'{params.path}.{k}' for k in unread)} not read: with an alpha, the model's NTK-alpha rotary "
            "(transformers' compute_ntk_alpha_rope_parameters, as Hunyuan's own code) only stretches the base by "
            "alpha^(d/(d-2))")
    return ConfigView({**raw, "rope_type": "ntk", "factor": params.raw["alpha"]}, params.path), (note,) if unread else ()


def _sub_config(parent: dict, key: str, inner: ConfigView) -> ConfigView:
    """A composite config's language config as transformers builds it: one naming no model type is
    of the type its parent's config class builds that key with (Llava's text_config: llama)."""
    if "model_type" in inner.raw:
        return inner
    default = ((class_facts(parent.get("model_type")) or {}).get("nested") or {}).get(key)
    return ConfigView({**inner.raw, "model_type": default}, inner.path) if default else inner


def _read_nested(inner: ConfigView, strict: bool) -> ModelPositions:
    """A composite config: the language model's positions are its own config's. Each level's model
    type without a family reader passes the gate (`checked.gate`); one transformers does not know
    is read by its architectures (`checked.read_as`)."""
    if "model_type" in inner.raw and not isinstance(inner.raw["model_type"], str):
        raise PosencError(inner.field("model_type"), f"must be a string, got {inner.raw['model_type']!r}")
    config, note = read_as(inner.raw, inner.field("model_type"))
    read = READERS.get(config.get("model_type"))
    if read is None:
        gate(config, inner.field("model_type"))
    for key in NESTED:
        if inner.has(key):  # Qwen-Omni: thinker_config.text_config
            return _read_nested(_sub_config(config, key, inner.obj(key)), strict)
    try:
        return noted((read or read_generic)(config, strict), inner.raw.get("model_type"), note)
    except PosencError as exc:
        field = exc.field.replace("config", inner.path, 1) if exc.field.startswith("config") else exc.field
        raise PosencError(field, exc.message) from None
