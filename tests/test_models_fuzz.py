"""Every key of every config fixture, set to every kind of JSON value: a result or PosencError.

A config.json is untrusted input. Whatever a key holds (string, list, object, bool, null, 0,
negative, huge, NaN / Infinity as Python's json module reads them), `posenc.from_hf_config`
must either return encodings that work (their frequencies compute) or raise PosencError
naming a config field -- never TypeError / KeyError / ZeroDivisionError / OverflowError.
"""

import json
import math
from pathlib import Path

import numpy as np
import pytest

import posenc
from posenc import PosencError

FIXTURES = sorted((Path(__file__).parent / "fixtures" / "hf_configs").glob("*.json"))
VALUES = ["x", "", [], [1, 2], [None], {}, {"a": 1}, {"rope_type": "linear"}, True, False, None, 0, -1, 1, 3,
          0.5, -0.5, 1e308, -1e308, 2**63, 10**400, 1e-300, float("nan"), float("inf"), -float("inf")]


def key_paths(obj, prefix=()):
    """Every key path of a config: top-level keys, keys of nested objects, first entries of lists."""
    for key, value in obj.items():
        yield prefix + (key,)
        if isinstance(value, dict):
            yield from key_paths(value, prefix + (key,))
        elif isinstance(value, list) and value and not isinstance(value[0], (dict, list)):
            yield prefix + (key, 0)


def mutated(config, path, value):
    out = json.loads(json.dumps(config))
    node = out
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    return out


def exercise(model):
    """Use what came back: every spec must describe itself and compute its frequencies."""
    json.dumps(model.to_dict(), allow_nan=False)
    for entry in model.encodings.values():
        if entry.spec.KIND == "rope":
            inv, attention = posenc.rope_inv_freq(entry.spec, seq_len=4096)
            assert np.isfinite(inv).all() and math.isfinite(attention)
            posenc.rope_cos_sin([0, 1, 100000], entry.spec, dtype="float64")


def check(config):
    try:
        model = posenc.from_hf_config(config)
    except PosencError as exc:
        assert exc.field.startswith("config") or exc.field == "layer_type", exc.field
        return
    exercise(model)


@pytest.mark.parametrize("fixture", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_every_key_every_json_type(fixture):
    config = json.loads(fixture.read_text())
    for path in key_paths(config):
        for value in VALUES:
            check(mutated(config, path, value))


@pytest.mark.parametrize("fixture", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_every_key_removed(fixture):
    config = json.loads(fixture.read_text())
    for key in config:
        check({k: v for k, v in config.items() if k != key})


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_the_whole_config_or_its_model_type(value):
    with pytest.raises(PosencError):
        posenc.from_hf_config(value)
    check({"model_type": value, "hidden_size": 64, "num_attention_heads": 2, "rope_theta": 1e4})
