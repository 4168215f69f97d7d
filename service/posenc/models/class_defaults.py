"""What transformers' config class fills in where a config.json leaves a key out.

A config.json is not what the model runs with: transformers builds its config class from it,
and the class fills in every key the file leaves out, some with a constant (a dataclass field
default: Qwen3-Next's `head_dim` 256, its class's `default_theta`, a partial rotary factor its
`__post_init__` sets by default) and some by deriving them from other keys (Qwen3-Next's
`layer_types` from `num_hidden_layers` and `full_attention_interval`, Arcee's `head_dim` from
hidden_size // num_attention_heads). The generic reader must read the config the class makes,
not the file, or a file without `layer_types` puts RoPE on Qwen3-Next's linear-attention layers.

checked.json records what each class does, found by building it (tests/golden/config_facts.py):
per model type, `defaults` (the constants, by config key) and `derives` (each derived key and
the rule it follows: `hidden_over_heads`, `same_as` another key, a `cycle` of layer types
repeated over the layers, one layer type `every` k-th layer with k from a key, or `other`).
`with_class_defaults` fills the constants in, applies the rules posenc can apply, and refuses a
config that leaves out a key the class derives in a way posenc does not mirror, naming it: it
never reads a derived key's absence as "the generic default".
"""

from __future__ import annotations

from ..errors import PosencError
from .checked import record
from .fields import MAX_LAYERS, ConfigView
from .mechanisms import ATTENTION_TYPES, LAYER_KEYS, num_layers
from .modeling import Modeling

#: The keys the generic reader reads (besides the rope dicts' contents), whose class defaults
#: checked.json records: the generator takes this list from here.
READ_KEYS = (
    *LAYER_KEYS, "layer_types", "layers_block_type", "qk_rope_head_dim", "head_dim", "kv_channels",
    "attention_head_dim", "hidden_size", "d_model", "n_embd", "num_attention_heads", "n_head", "n_heads",
    "max_position_embeddings", "model_max_length", "max_seq_len", "original_max_position_embeddings",
    "partial_rotary_factor", "rotary_dim", "rotary_pct", "rope_pct", "no_rope_layers", "no_rope_layer_interval",
    "layer_rope_theta", "rope_scaling_layers", "cross_attention_layers", "block_types", "attn_layer_indices",
    "rope_interleave", "position_embedding_type", "use_mem_rope", "sliding_window", "per_layer_config",
    "attn_temperature_tuning", "floor_scale", "attn_scale",  # Llama-4's position-dependent temperature (a note)
)
_ROPE_DICTS = ("rope_parameters", "rope_scaling")  # where a config gives its rope dict (transformers' `or`)


def class_facts(model_type) -> dict | None:
    """checked.json's `config` facts of a model type transformers knows (None for one it does not)."""
    entry = record()["model_types"].get(model_type) if isinstance(model_type, str) else None
    return None if entry is None else entry.get("config")


def with_class_defaults(view: ConfigView, facts: Modeling) -> ConfigView:
    """The config as its transformers config class makes it, for the keys the generic reader reads:
    absent keys given the class's constants, derived keys its rules (a PosencError naming a
    derived key that is absent where posenc does not mirror how the class derives it)."""
    found = class_facts(view.raw.get("model_type"))
    if not found:
        return view
    raw = dict(view.raw)
    derives = dict(found.get("derives", {}))
    rope = derives.pop("rope_parameters", None)
    if rope is not None and not any(view.obj(k) is not None and view.obj(k).raw for k in _ROPE_DICTS):
        raw["rope_parameters"] = _default_rope_dict(view, rope, found)  # from the config's own base, not a default
    aliases = found.get("aliases", {})
    for key, value in found.get("defaults", {}).items():
        if key not in raw and not any(alias in raw for alias, target in aliases.items() if target == key):
            raw[key] = value
    filled = ConfigView(raw, view.path)
    for key, rule in derives.items():
        if filled.has(key) or key in mirrored(facts) or (key == "sliding_window" and facts.nope is None):
            continue  # given, derived by the family's own facts, or (a window) read by no NoPE rule of it
        value = _derived(filled, key, rule, facts, found)
        if value is not None:
            raw[key] = value
    return ConfigView(raw, view.path)


def _default_rope_dict(view: ConfigView, rule: dict, found: dict) -> dict:
    """The rope dict the class makes for a config that gives none (`template`: its own dict, with
    the config's rope_theta / partial_rotary_factor where the class puts them), else a PosencError."""
    if rule["rule"] != "template":
        raise PosencError(view.field("rope_parameters"), f"is absent, and {_deriving(found)} fills in its own "
                          f"default rope_parameters, which posenc does not mirror for model type "
                          f"{view.raw.get('model_type')!r}: give rope_parameters")
    return template_dict(rule, view.raw.get("rope_theta"), view.raw.get("partial_rotary_factor"))


def template_dict(rule: dict, theta, prf) -> dict:
    """A `template` rule's rope dict with a base and a partial rotary factor (None: the class's
    own) at the places the class puts a given one (top level, or a layer type's dict)."""
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in rule["rope_parameters"].items()}
    for paths, value in ((rule["theta_at"], theta), (rule["prf_at"], prf)):
        for path in paths if value is not None else ():
            (out if len(path) == 1 else out[path[0]])[path[-1]] = value
    return out


def mirrored(facts: Modeling) -> frozenset[str]:
    """The derived keys a family's modeling facts already derive as its config class does."""
    out = set()
    if facts.nope_interval is not None:  # Llama-4 / SmolLM3: no_rope_layers from no_rope_layer_interval
        out.add("no_rope_layers")
    if facts.head is not None:  # Zamba2: the attention's head width from the hidden size
        out |= {"attention_head_dim", "kv_channels", "head_dim"}
    return frozenset(out)


def _derived(view: ConfigView, key: str, rule: dict, facts: Modeling, found: dict):
    """The value the class derives for an absent `key` by `rule` (None: the reader's own fallback
    is the class's rule, or the key changes no position), else a PosencError naming it."""
    kind = rule["rule"]
    if kind == "hidden_over_heads":  # the generic reader's head_dim fallback is this rule
        return None
    if kind == "same_as":
        return view.raw.get(rule["key"])
    if kind in ("cycle", "every"):
        layers, _ = num_layers(view)
        if kind == "cycle":
            cycle = rule["cycle"]
            return [cycle[i % len(cycle)] for i in range(layers)]
        period = view.int(rule["key"], rule["default"], maximum=MAX_LAYERS)
        return [rule["on"] if (i + 1) % period == 0 else rule["off"] for i in range(layers)]
    if key == "layer_types" and _changes_no_position(view, rule, facts):
        return None
    raise PosencError(view.field(key), f"is absent, and {_deriving(found)} derives it from "
                      f"{', '.join(rule.get('inputs') or ['other keys'])} in a way posenc does not mirror for model "
                      f"type {view.raw.get('model_type')!r}: give {key}")


def _changes_no_position(view: ConfigView, rule: dict, facts: Modeling) -> bool:
    """Whether the layer types a class derives can change no layer's positions: every kind it
    makes attends with positions, the family has no NoPE or per-type scaling rule and the config
    no rope dict nested per layer type, so one RoPE serves every layer whatever the pattern."""
    params = next((view.obj(k) for k in _ROPE_DICTS if view.obj(k) is not None and view.obj(k).raw), None)
    nested = params is not None and any(isinstance(v, dict) for v in params.raw.values())
    return (set(rule.get("kinds", ())) <= ATTENTION_TYPES and facts.nope is None and facts.legacy_scaled is None
            and facts.attention_kinds is None and not facts.nested_only and not nested)


def _deriving(found: dict) -> str:
    """The class, as a message names it: "transformers 5.24.0's Qwen3NextConfig"."""
    return f"transformers {record()['transformers']}'s {found.get('class', 'config class')}"
