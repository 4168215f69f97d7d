"""Models whose layer types use different RoPEs (Gemma-3, ModernBERT) or only some layers use
RoPE (Cohere2): which layer is which, and one spec per layer type.

A layer's type comes from `layer_types` (transformers 5) or, in older configs, from a period:
Gemma-3 / Cohere2 make every `sliding_window_pattern`-th layer (1-based) `full_attention`,
ModernBERT every `global_attn_every_n_layers`-th (0-based) one.
"""

from __future__ import annotations

from ..errors import PosencError
from .fields import ConfigView
from .positions import LayerPositions
from .rope_params import Dims, RopeFamily, build_spec, read_dims, top_level

SLIDING, FULL = "sliding_attention", "full_attention"


def periodic_layer_types(view: ConfigView, layers: int, pattern_key: str | None, default_period: int, *,
                         full_at_zero: bool) -> tuple[str, ...]:
    """`layer_types` if given, else the period rule (full_at_zero: layer 0 is full, ModernBERT), its
    period from `pattern_key` (None: a fixed period, Gemma-3n's, that no key changes)."""
    given = view.str_list("layer_types", layers, (SLIDING, FULL))
    if given is not None:
        return given
    period = view.int(pattern_key, default_period) if pattern_key else default_period
    offset = 0 if full_at_zero else 1
    return tuple(SLIDING if (i + offset) % period else FULL for i in range(layers))


def nested_rope_dicts(view: ConfigView, family_name: str) -> dict[str, ConfigView | None] | None:
    """transformers 5's `rope_parameters` nested per layer type ({"full_attention": {...}, ...}),
    or None when the config uses the legacy flat keys."""
    params = view.obj("rope_parameters")
    if params is None:
        return None
    nested = {k: params.raw[k] for k in (FULL, SLIDING) if k in params.raw}
    others = [k for k in params.raw if k not in (FULL, SLIDING)]
    if others:
        raise PosencError(params.field(others[0]), f"{family_name} nests rope_parameters by layer type "
                          f"({FULL!r}, {SLIDING!r}); a flat or other key is not read by its modeling code")
    return {k: params.obj(k) for k in nested}  # a null entry is absent: transformers fills in the default


def entries(layer_types: tuple[str, ...], specs: dict) -> dict[str, LayerPositions]:
    """One LayerPositions per layer type that has a spec, with the indices of its layers."""
    out = {}
    for name, spec in specs.items():
        indices = tuple(i for i, t in enumerate(layer_types) if t == name)
        if indices:
            out[name] = LayerPositions(name, spec, indices, spec.layout)
    return out


def rope_per_layer_type(view: ConfigView, family: RopeFamily, thetas: dict, *, legacy_scaled: tuple[str, ...],
                        family_name: str) -> tuple[dict, Dims]:
    """{layer type: RopeSpec} for Gemma-3 / ModernBERT: nested rope_parameters if present,
    else the legacy keys (`thetas` names each type's base key, `legacy_scaled` the types
    `rope_scaling` applies to)."""
    dims = read_dims(view, family)
    nested = nested_rope_dicts(view, family_name)
    scaling = view.obj("rope_scaling")
    specs = {}
    for layer_type, (theta_key, default) in thetas.items():
        theta = top_level(view, (theta_key,), default, view.field(theta_key))
        params = nested.get(layer_type) if nested else None  # absent or null: {"rope_type": "default"}
        if scaling is not None and scaling.raw and layer_type in legacy_scaled:
            params = _merged(params, scaling)
        specs[layer_type] = build_spec(params, theta=theta, prf=None, dims=dims, original=None,
                                       layout=family.layout)
    return specs, dims


def _merged(params: ConfigView | None, scaling: ConfigView) -> ConfigView:
    """transformers' `rope_parameters[layer_type].update(rope_scaling)`; errors name rope_scaling."""
    if params is None:
        return scaling
    return ConfigView({**params.raw, **scaling.raw}, scaling.path)
