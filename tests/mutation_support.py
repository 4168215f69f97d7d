"""Mutations of spec and config fixtures: every key (nested ones too) replaced by values of every JSON
type and extreme numbers, or removed. Shared by the library test (PosencError only) and the HTTP
test (4xx only), so both see exactly the same hostile inputs."""

from __future__ import annotations

import copy
import json
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures" / "hf_configs"

#: One value of every JSON type, plus the numbers that break naive arithmetic (overflow to inf,
#: underflow to 0, subnormals, beyond int64, beyond float64 for an int).
JSON_VALUES = [None, True, False, 0, 1, -1, 2, 3, 0.5, -0.5, 1.5, 1e308, -1e308, 1e-308, 5e-324, 2**31, 2**53 + 1,
               2**63 - 1, -(2**63), "", "x", "1", "1e308", [], [1], [[1]], [None], {}, {"a": 1}, {"rope_type": "x"}]
#: Only the library sees these (JSON has no NaN/inf, orjson refuses integers beyond 64 bits).
LIBRARY_ONLY_VALUES = [float("nan"), float("inf"), float("-inf"), 2**64, 10**400, b"x", object()]
REMOVED = object()
#: One value of each JSON type (null, boolean, integer, real, string, array, object): what a key the code
#: under test never reads gets instead of every value (see `unread_paths`).
ONE_OF_EACH_TYPE = [None, True, 0, 0.5, "x", [1], {"a": 1}]

#: Spec dicts exercising every key each spec class knows (all RoPE scaling variants).
ROPE_SPECS = {
    "default": {"head_dim": 64, "base": 10000.0, "partial_rotary_factor": 0.5, "max_position_embeddings": 4096,
                "layout": "interleaved", "xpos_scale_base": 512.0},
    "linear": {"head_dim": 64, "scaling": {"rope_type": "linear", "factor": 2.0}},
    "ntk": {"head_dim": 64, "scaling": {"rope_type": "ntk", "factor": 2.0}},
    "dynamic": {"head_dim": 64, "max_position_embeddings": 2048, "scaling": {"rope_type": "dynamic", "factor": 2.0}},
    "yarn": {"head_dim": 64, "max_position_embeddings": 8192, "original_max_position_embeddings": 2048,
             "scaling": {"rope_type": "yarn", "factor": 4.0, "beta_fast": 32, "beta_slow": 1, "mscale": 1.0,
                         "mscale_all_dim": 1.0, "truncate": True}},
    "yarn_af": {"head_dim": 64, "max_position_embeddings": 8192,
                "scaling": {"type": "yarn", "factor": 4.0, "attention_factor": 1.2,
                            "original_max_position_embeddings": 2048}},
    "longrope": {"head_dim": 8, "max_position_embeddings": 8192, "original_max_position_embeddings": 2048,
                 "scaling": {"rope_type": "longrope", "long_factor": [1.0, 2.0, 3.0, 4.0],
                             "short_factor": [1.0, 1.0, 1.0, 1.0], "factor": 4.0, "attention_factor": 1.1}},
    "llama3": {"head_dim": 64, "base": 500000.0, "original_max_position_embeddings": 8192,
               "scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}},
    "proportional": {"head_dim": 64, "partial_rotary_factor": 0.25,
                     "scaling": {"rope_type": "proportional", "factor": 2.0}},
}
SINUSOIDAL_SPECS = {
    "interleaved": {"dim": 8, "base": 10000.0, "layout": "interleaved", "scale": [1, 2, 3, 4, 5, 6, 7, 8],
                    "target_std": 0.02},
    "t2t": {"dim": 7, "layout": "t2t", "min_timescale": 1.0, "max_timescale": 1000.0},
}
ALIBI_SPECS = {"mpt": {"n_heads": 12, "variant": "mpt", "alibi_bias_max": 8}}
LEARNED_SPECS = {"opt": {"num_positions": 16, "dim": 8, "tensor": "wpe", "offset": 2, "sha256": "0" * 64}}
TABLE_SPECS = {
    "sinusoidal": {"encoding": {"kind": "sinusoidal", "dim": 8}, "start": -4, "stop": 16, "dtype": "float64"},
    "rope": {"encoding": {"kind": "rope", **ROPE_SPECS["dynamic"]}, "start": 0, "stop": 16, "dtype": "float32",
             "seq_len": 4096},
    "alibi": {"encoding": {"kind": "alibi", **ALIBI_SPECS["mpt"]}, "stop": 16},
}
#: Keyword arguments of the array entry points (positions and x given by the callers).
T5_ARGS = {"relative_position": [-200, -3, 0, 3, 200], "bidirectional": True, "num_buckets": 32, "max_distance": 128}
ALIBI_BIAS_ARGS = {"n_heads": 4, "q_len": 3, "k_len": 5, "q_offset": 2, "k_offset": 0, "mode": "causal",
                   "gamma": [1.0, 0.5, 0.25, 2.0], "variant": "paper", "dtype": "float32"}
ALIBI_SLOPES_ARGS = {"n_heads": 12, "variant": "mpt", "alibi_bias_max": 8}
SINUSOIDAL_ARGS = {"positions": [0, 1, 2.5], "dim": 8, "base": 10000.0, "layout": "halves", "dtype": "float16"}
ROPE_CALL_ARGS = {"positions": [0, 1, 5], "seq_len": 4096, "dtype": "bfloat16"}


def hf_configs() -> dict[str, dict]:
    return {path.stem: json.loads(path.read_text()) for path in sorted(FIXTURES.glob("*.json"))}


def key_paths(doc: dict, prefix: tuple = ()) -> list[tuple]:
    """Every key path of a nested dict (lists are leaves)."""
    paths = []
    for key, value in doc.items():
        paths.append(prefix + (key,))
        if isinstance(value, dict):
            paths += key_paths(value, prefix + (key,))
    return paths


def mutated(doc: dict, path: tuple, value) -> dict:
    out = copy.deepcopy(doc)
    node = out
    for key in path[:-1]:
        node = node[key]
    if value is REMOVED:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return out


def unread_paths(doc: dict, read) -> frozenset[tuple]:
    """Key paths of `doc` that `read` never looks at: every mutation of one (each of JSON_VALUES, and
    the key removed) leaves `read`'s result equal to read(doc) and raises nothing. When `read` is all
    that the code under test derives from the doc, such a key cannot change its answer whatever it
    holds, so sending it every extreme number again proves nothing that one value of each type does not."""
    base = read(doc)

    def unchanged(candidate) -> bool:
        try:
            return read(candidate) == base
        except Exception:  # noqa: BLE001 - a key whose value can raise is a key that is read
            return False

    return frozenset(path for path in key_paths(doc)
                     if all(unchanged(mutated(doc, path, value)) for value in [*JSON_VALUES, REMOVED]))


def mutations(doc: dict, values=JSON_VALUES, required=(), unread=frozenset()):
    """(description, mutated doc) for every key path x every value (and the key removed, unless it
    is a `required` argument of a Python call, where a missing argument is Python's TypeError).
    Paths in `unread` (from `unread_paths`) get ONE_OF_EACH_TYPE instead of `values`."""
    for path in key_paths(doc):
        tried = ONE_OF_EACH_TYPE if path in unread else values
        for value in [*tried] + ([] if path[0] in required else [REMOVED]):
            label = "removed" if value is REMOVED else repr(value)[:40]
            yield f"{'.'.join(map(str, path))} = {label}", mutated(doc, path, value)
