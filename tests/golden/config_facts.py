"""What each transformers config class fills in for the keys posenc reads: checked.json's `config`
facts (posenc.models.class_defaults applies them) and the architecture -> model type map that
from_hf_config reads an unknown model type by. Needs transformers; builds no model.

A class is built with probes (no key, a layer count, a hidden size, a base, and each key its
`__post_init__` reads changed), and for every key of `class_defaults.READ_KEYS` the values its
`to_dict()` holds are compared: a key whose value no probe changes is a constant default; one
that changes is derived, and its rule is named where it is one posenc applies (head_dim =
hidden // heads, a copy of another key, a fixed cycle of layer types, one type every k-th layer
with k from a key), else `other` with the keys it depends on. The rope dict the class makes is
`standard` (its default_theta, as RotaryEmbeddingConfigMixin standardises one) or `other`. A
composite class's `nested` is the model type it builds a language config that names none with.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import re
import warnings

import transformers
from posenc.models.class_defaults import READ_KEYS, template_dict
from posenc.models.generic import NESTED
from transformers import CONFIG_MAPPING
from transformers.models.auto import modeling_auto

LAYERS = ("num_hidden_layers", "num_layers", "n_layer", "n_layers")
HIDDEN = ("hidden_size", "d_model", "n_embd")
HEADS = ("num_attention_heads", "n_head", "n_heads")
PROBE_BASE = 123456.0
PROBE_FACTOR = 0.375
KWARGS = re.compile(r"kwargs\.(?:pop|get|setdefault)\(\s*[\"'](\w+)[\"']\s*,\s*([^()]*?)\)")
SELF = re.compile(r"self\.(\w+)")


def architectures() -> dict[str, str]:
    """{model class name: model type} over transformers' auto mappings (every task head), each class
    under the model type whose config class it is built with (its `config_class`, where a class
    is listed under several model types)."""
    listed: dict[str, set[str]] = {}
    for name, mapping in vars(modeling_auto).items():
        if name.startswith("MODEL") and name.endswith("_MAPPING_NAMES") and isinstance(mapping, dict):
            for model_type, classes in mapping.items():
                for cls in (classes,) if isinstance(classes, str) else classes:
                    listed.setdefault(cls, set()).add(model_type)
    out = {}
    for cls, types in sorted(listed.items()):
        types = {t for t in types if t in CONFIG_MAPPING}
        if len(types) > 1:
            types = {t for t in types if _config_class_name(cls) == CONFIG_MAPPING[t].__name__}
        if len(types) == 1:
            out[cls] = types.pop()
    return out


def _config_class_name(cls_name: str) -> str | None:
    """The name of a model class's config class (importing its module), None if it does not import."""
    cls = getattr(transformers, cls_name, None)
    try:
        return getattr(cls, "config_class", None).__name__
    except Exception:  # noqa: BLE001  (a modeling module whose optional dependency is missing)
        return None


def class_facts(model_type: str) -> dict:
    """{"class", "defaults", "aliases", "derives"} of one model type's config class ({} when its
    defaults do not build)."""
    cls = CONFIG_MAPPING[model_type]
    probe = Prober(cls)
    bare = probe.build({})
    if bare is None:
        return {}
    defaults, derives = {}, {}
    for key in READ_KEYS:
        seen = probe.values(key)
        if not seen:
            continue
        inputs = probe.inputs_of(key)
        if not inputs:
            value = seen[0][1]
            if key not in bare:
                continue
            if probe.keeps(key, value):  # a null too: it can mean something (Bamba's attn_layer_indices: none)
                defaults[key] = value
            else:  # the class overrides a given value
                derives[key] = {"rule": "other", "inputs": [key]}
            continue
        derives[key] = probe.rule(key, seen, inputs)
    rope = probe.rope_rule()
    if isinstance(bare.get("rope_parameters"), dict):  # the base a rope dict without one gets
        defaults["rope_theta"] = cls.default_theta
    if rope is not None:
        derives["rope_parameters"] = rope
    elif "partial_rotary_factor" in (bare.get("rope_parameters") or {}) and "partial_rotary_factor" not in derives:
        defaults.setdefault("partial_rotary_factor", bare["rope_parameters"]["partial_rotary_factor"])
    aliases = {a: t for a, t in getattr(cls, "attribute_map", {}).items() if t in defaults or t in derives}
    nested = {key: bare[key]["model_type"] for key in NESTED if isinstance(bare.get(key), dict)
              and bare[key].get("model_type")}  # the type it builds a language config without one with
    return {"class": cls.__name__, "defaults": defaults, **({"aliases": aliases} if aliases else {}),
            **({"derives": derives} if derives else {}), **({"nested": nested} if nested else {})}


class Prober:
    """One config class built with probes: no key, a layer count, a hidden size, a base, and each
    key its `__post_init__` reads set to another value (alone and with the layer count)."""

    def __init__(self, cls):
        self.cls = cls
        self.fields = {f.name: _field_default(f) for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) \
            else {}
        self._built: dict[str, dict | None] = {}
        bare = self.build({}) or {}
        self.layer_key = next((k for k in LAYERS if isinstance(bare.get(k), int)), None)
        self.hidden_key = next((k for k in HIDDEN if isinstance(bare.get(k), int)), None)
        self.heads_key = next((k for k in HEADS if isinstance(bare.get(k), int)), None)
        #: (probe, the input it changes): each probe differs from {} or from a layer-count probe by one key
        self.probes: list[tuple[dict, str | None]] = [({}, None)]
        for layers in (12, 7):
            if self.layer_key:
                self.probes.append(({self.layer_key: layers}, self.layer_key))
        if self.hidden_key:
            self.probes.append(({self.hidden_key: bare[self.hidden_key] * 3}, self.hidden_key))
        self.probes.append(({"rope_theta": PROBE_BASE}, "rope_theta"))
        for key, value in self.inputs(bare).items():
            if key == self.layer_key:
                continue
            self.probes.append(({key: value}, key))
            if self.layer_key:
                self.probes.append(({key: value, self.layer_key: 12}, key))

    def build(self, probe: dict) -> dict | None:
        """The class's to_dict() built from `probe` as a config.json would give it (None if it refuses it)."""
        name = json.dumps(probe, sort_keys=True)
        if name not in self._built:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    self._built[name] = json.loads(json.dumps(self.cls(**probe).to_dict(), default=str))
                except Exception:  # noqa: BLE001  (a class refuses a probe with whatever error its validators raise)
                    self._built[name] = None
        return self._built[name]

    def values(self, key: str) -> list[tuple[dict, object]]:
        """(probe, the value of `key`) for each probe that leaves `key` out and builds."""
        return [(p, built.get(key)) for p, _ in self.probes if key not in p and (built := self.build(p)) is not None]

    def inputs_of(self, key: str) -> list[str]:
        """The keys whose probe changes `key`'s value from the probe without them."""
        out = set()
        for probe, changed in self.probes:
            if changed is None or key in probe:
                continue
            base = self.build({k: v for k, v in probe.items() if k != changed})
            built = self.build(probe)
            if base is not None and built is not None and json.dumps(base.get(key), sort_keys=True) != json.dumps(
                    built.get(key), sort_keys=True):
                out.add(changed)
        return sorted(out)

    def keeps(self, key: str, value) -> bool:
        """Whether the class keeps a value given for `key` (an int or float one changed; others are kept)."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return True
        other = value * 2 if value else 3
        built = self.build({key: other})
        return built is None or built.get(key) == other

    def inputs(self, bare: dict) -> dict:
        """The keys the class's own `__post_init__`s read, each with another value to probe it with:
        its fields (`self.x`) and the keyword arguments it pops (`kwargs.pop("x", default)`)."""
        source = "\n".join(inspect.getsource(k.__dict__["__post_init__"]) for k in self.cls.__mro__
                           if "__post_init__" in k.__dict__ and k.__module__.startswith("transformers.models."))
        out = {}
        for name, default in KWARGS.findall(source):
            try:
                value = ast.literal_eval(default.strip())
            except (ValueError, SyntaxError):
                continue
            alt = _other(value)
            if alt is not None:
                out[name] = alt
        for name in dict.fromkeys(SELF.findall(source)):
            if name in self.fields and name not in out:
                alt = _other(bare.get(name, self.fields[name]))
                if alt is not None:
                    out[name] = alt
        return out

    def rule(self, key: str, seen: list, inputs: list) -> dict:
        """The rule a derived key follows over the probes (`other` when it is none posenc applies)."""
        values = {json.dumps(p, sort_keys=True): v for p, v in seen}
        if key == "head_dim" and self.hidden_key and self.heads_key and all(
                v == self._size(p, self.hidden_key) // self._size(p, self.heads_key) for p, v in seen):
            return {"rule": "hidden_over_heads"}
        for other in inputs:
            if all(v == (self.build(p) or {}).get(other) for p, v in seen):
                return {"rule": "same_as", "key": other}
        if key == "layer_types" and all(isinstance(v, list) for v in values.values()):
            found = self._cycle(seen, inputs) or self._every(inputs)
            if found:
                return found
        kinds = sorted({k for v in values.values() if isinstance(v, list) for k in v if isinstance(k, str)})
        return {"rule": "other", "inputs": inputs, **({"kinds": kinds} if kinds else {})}

    def _cycle(self, seen: list, inputs: list) -> dict | None:
        """layer_types that depend on the layer count alone, each layer's type that of a fixed cycle."""
        if not self.layer_key or set(inputs) - {self.layer_key}:
            return None
        longest = max((v for _, v in seen), key=len)
        period = next((p for p in range(1, len(longest) // 2 + 1)
                       if all(longest[i] == longest[i % p] for i in range(len(longest)))), None)
        if period is None:
            return None
        cycle = longest[:period]
        if all(v == [cycle[i % period] for i in range(self._size(p, self.layer_key))] for p, v in seen):
            return {"rule": "cycle", "cycle": cycle}
        return None

    def _every(self, inputs: list) -> dict | None:
        """layer_types with one type every k-th layer (1-based) and another elsewhere, k from one key."""
        keys = set(inputs) - {self.layer_key}
        if len(keys) != 1 or not self.layer_key:
            return None
        key = keys.pop()
        lists = {k: (self.build({key: k, self.layer_key: 12}) or {}).get("layer_types") for k in (2, 3, 5)}
        if not isinstance(lists[2], list) or len(set(lists[2][:2])) != 2:
            return None
        off, on = lists[2][0], lists[2][1]
        if any(v != [on if (i + 1) % k == 0 else off for i in range(12)] for k, v in lists.items()):
            return None
        bare = self.build({}) or {}
        period = next((i + 1 for i, t in enumerate(bare.get("layer_types") or []) if t == on), None)
        if period is None or bare["layer_types"] != [on if (i + 1) % period == 0 else off
                                                     for i in range(len(bare["layer_types"]))]:
            return None
        return {"rule": "every", "key": key, "default": period, "on": on, "off": off}

    def rope_rule(self) -> dict | None:
        """None when the class's rope dict is RotaryEmbeddingConfigMixin's standard one (rope type
        "default" and the config's base, else its default_theta); else the `template` rule, the
        dict it makes where a config gives no rope dict with the places a given base and partial
        rotary factor go (Apertus' llama3 dict, which keeps no given base; OLMo-3's dict per layer
        type, whose full_attention takes it), checked with two values of each; else `other`."""
        bare = self.build({}) or {}
        params = bare.get("rope_parameters")
        if not isinstance(params, dict):
            return None
        theta_at = _paths(self.build({"rope_theta": PROBE_BASE}), PROBE_BASE)
        prf_at = _paths(self.build({"partial_rotary_factor": PROBE_FACTOR}), PROBE_FACTOR)
        rule = {"rule": "template", "rope_parameters": params, "theta_at": theta_at, "prf_at": prf_at}
        probes = [p for p, _ in self.probes] + [{"rope_theta": 2 * PROBE_BASE}, {"partial_rotary_factor": PROBE_FACTOR},
                                                {"partial_rotary_factor": PROBE_FACTOR / 2}]
        for probe in probes:  # the same dict whatever else the config gives (a layer count, a head size)
            built = self.build(probe)
            if built is not None and built.get("rope_parameters") != template_dict(
                    rule, probe.get("rope_theta"), probe.get("partial_rotary_factor")):
                return {"rule": "other", "inputs": ["rope_parameters"]}
        extra = {k: params[k] for k in ("partial_rotary_factor",) if k in params}
        standard = {"rope_type": "default", "rope_theta": self.cls.default_theta, **extra}
        if params == standard and theta_at == [["rope_theta"]] and prf_at in ([], [["partial_rotary_factor"]]):
            return None
        return rule

    def _size(self, probe: dict, key: str) -> int:
        return probe.get(key, (self.build({}) or {}).get(key))


def _paths(built: dict | None, value: float) -> list[list[str]]:
    """The key paths inside a built config's rope_parameters that hold `value` (a probed base or factor)."""
    params = (built or {}).get("rope_parameters")
    if not isinstance(params, dict):
        return []
    out = [[k] for k, v in params.items() if v == value]
    out += [[k, sub] for k, v in params.items() if isinstance(v, dict) for sub, w in v.items() if w == value]
    return sorted(out)  # a class may build its dict from a set of layer types: its order is not the class's


def _field_default(field):
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        try:
            return field.default_factory()
        except Exception:  # noqa: BLE001  (a factory that needs arguments: no static default)
            return None
    return None


def _other(value):
    """Another value of the same kind to probe a key with (None: not one probed)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1 if value else 3
    if isinstance(value, float):
        return value * 2 if value else 0.5
    if value is None:
        return 4096
    return None
