"""Every config class of the installed transformers: a config.json that leaves out what the class
fills in (a default, or a key its `__post_init__` derives from others) is read as the class makes
it, or refused naming what posenc does not derive; never answered otherwise.

For each model type posenc answers (a family reader, or a golden checked it: checked.json) its
class is built with its defaults, and configs are written from that: the bare `{"model_type"}`,
one with another layer count, its defaults with each key posenc reads left out in turn (the
derived ones, layer_types, head_dim, rope_parameters, ...: class_defaults.READ_KEYS), its legacy
form with another base and no rope dict, and for a layer pattern the class derives from a key
(Qwen3-Next's full_attention_interval) other values of that key. Each is read by posenc as it is
and as transformers' class makes it (`to_dict()`): the answers must be the same, or the file's a
refusal. This runs against whatever transformers is installed, so a release that derives a key
anew fails here until checked.json is regenerated (tests/golden/generate_models.py --table) and
posenc follows it.
"""

import copy
import json
import sys
from functools import cache
from pathlib import Path

import config_forms
import pytest
from posenc.models import READERS, checked, families  # noqa: F401  (families registers every reader)
from posenc.models.class_defaults import READ_KEYS

transformers = pytest.importorskip("transformers")

RECORD = checked.record()["model_types"]
LAYER_KEYS = ("num_hidden_layers", "num_layers", "n_layer", "n_layers")
TYPES = sorted(t for t in transformers.CONFIG_MAPPING if t in READERS or
               RECORD.get(t, {}).get("golden") in ("judged", "family", "nonrotary"))


@cache
def outcomes(model_type: str) -> dict[str, str]:
    """{probe: "equal" | "file refused" | what differs} for one model type (built once for the summary)."""
    cls = transformers.CONFIG_MAPPING[model_type]
    try:
        defaults = config_forms.plain(cls().to_dict())
    except Exception:  # noqa: BLE001  (a class whose own defaults do not validate: nothing to write from)
        return {}
    out = {}
    for name, probe in probes(model_type, defaults).items():
        raw = {**{k: v for k, v in probe.items() if k not in config_forms.NOT_KEYWORDS}, "model_type": model_type}
        try:
            made = config_forms.plain(cls(**copy.deepcopy({k: v for k, v in raw.items() if k != "model_type"})).to_dict())
        except Exception:  # noqa: BLE001, S112  (the class refuses this file: no form to compare with)
            continue
        as_file, as_class = config_forms.answer(raw), config_forms.answer(made)
        if as_file == as_class:
            out[name] = "equal"
        elif as_file[0] == "refused" and as_file[1].startswith("config"):
            out[name] = "file refused"
        else:
            out[name] = f"the file -> {str(as_file)[:400]}; as its class makes it -> {str(as_class)[:400]}"
    return out


def probes(model_type: str, defaults: dict) -> dict[str, dict]:
    """{name: config.json} written from a class's defaults."""
    layers = next((k for k in LAYER_KEYS if isinstance(defaults.get(k), int)), None)
    out = {"bare": {}}
    if layers:
        out[f"{layers}=10"] = {layers: 10}
    for key in (*READ_KEYS, "rope_parameters"):
        if key in defaults:
            out[f"without {key}"] = {k: v for k, v in defaults.items() if k != key}
    if isinstance(defaults.get("rope_parameters"), dict):
        out["legacy, base 55555"] = {**{k: v for k, v in defaults.items() if k != "rope_parameters"},
                                     "rope_theta": 55555.0}
    for key, rule in RECORD.get(model_type, {}).get("config", {}).get("derives", {}).items():
        if rule["rule"] == "every" and layers:
            for every, count in ((3, 10), (2, 9)):
                out[f"{rule['key']}={every}"] = {rule["key"]: every, layers: count}
    return out


@pytest.mark.parametrize("model_type", TYPES)
def test_a_config_leaving_out_what_its_class_fills_in(model_type):
    wrong = {name: what for name, what in outcomes(model_type).items() if what not in ("equal", "file refused")}
    assert not wrong, json.dumps(wrong, indent=1)


def test_most_such_configs_are_answered():
    """The refusals are the exception: most configs written from a class's defaults are answered as it makes them."""
    seen = [what for t in TYPES for what in outcomes(t).values()]
    assert len(seen) > 2000 and seen.count("equal") >= 0.7 * len(seen), \
        f"{seen.count('equal')} of {len(seen)} answered as the class makes them"


def test_qwen3_next_without_layer_types_rotates_only_its_full_attention_layers():
    """The named case: transformers derives layer_types from full_attention_interval (every 4th full)."""
    raw = {"model_type": "qwen3_next", "hidden_size": 2048, "num_attention_heads": 16, "head_dim": 256,
           "num_hidden_layers": 8, "partial_rotary_factor": 0.25, "full_attention_interval": 4}
    made = transformers.Qwen3NextConfig(**{k: v for k, v in raw.items() if k != "model_type"})
    assert [i for i, t in enumerate(made.layer_types) if t == "full_attention"] == [3, 7]
    kind, per_layer, without = config_forms.answer(raw)
    assert kind == "answered" and sorted(per_layer) == [3, 7] and without == (0, 1, 2, 4, 5, 6)
    assert config_forms.answer(raw) == config_forms.answer(made)


def test_the_record_is_what_the_installed_transformers_classes_fill_in():
    """checked.json's `config` facts of the model types the generic reader reads, found anew from the
    installed transformers: a release that changes a default or a derivation fails here first."""
    sys.path.insert(0, str(Path(__file__).parent / "golden"))
    import config_facts

    generic = [t for t in TYPES if t not in READERS]
    stale = [t for t in generic if config_facts.class_facts(t) != RECORD[t].get("config")]
    assert len(generic) > 200 and not stale, "regenerate: python tests/golden/generate_models.py --table"

