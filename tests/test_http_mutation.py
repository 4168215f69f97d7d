"""The spec and config fixtures of test_spec_mutation, mutated the same way (every key, every JSON type,
extreme numbers, removed), sent to every route that takes them, PUT /v1/tables included: the answer
is 200/201 or a 4xx error body naming a field; never a 500. In-process (no sockets), about 9k requests
(sent from inside the event loop: asgi_support)."""

import shutil
import tempfile

import orjson
import pytest
from asgi_support import request_all
from fastapi.testclient import TestClient
from mutation_support import (
    ALIBI_BIAS_ARGS,
    ALIBI_SLOPES_ARGS,
    ALIBI_SPECS,
    ROPE_SPECS,
    SINUSOIDAL_SPECS,
    T5_ARGS,
    TABLE_SPECS,
    hf_configs,
    key_paths,
    mutations,
    unread_paths,
)

import posenc
from posenc.config import ServiceConfig
from posenc.http import create_app

KEY = {"Authorization": "Bearer secret"}


@pytest.fixture(scope="module")
def client():
    root = tempfile.mkdtemp(prefix="posenc-mutation-", dir="/dev/shm")
    config = ServiceConfig.from_dict({"server": {"shm_dir": root}, "limits": {"max_output_bytes": 4 << 20},
                                      "api_key": "secret"})
    with TestClient(create_app(config), raise_server_exceptions=False) as c:
        yield c
    shutil.rmtree(root, ignore_errors=True)


def served_model(config: dict) -> dict:
    """All the service derives from an hf_config (its routes read one only through posenc.from_hf_config)."""
    return posenc.from_hf_config(config).to_dict()


def _requests():
    """(name, method, path, body builder from the mutated doc, the doc, what the service derives from
    the doc -- None where that is every key: a spec) for every fixture and route."""
    for name, spec in ROPE_SPECS.items():
        yield (f"inv_freq[{name}]", "POST", "/v1/rope/inv_freq", lambda d: {"spec": d, "seq_len": 4096},
               spec, None)
        yield (f"cos_sin[{name}]", "POST", "/v1/rope/cos_sin", lambda d: {"spec": d, "positions": [0, 1, 5]},
               spec, None)
    for name, spec in SINUSOIDAL_SPECS.items():
        yield (f"sinusoidal[{name}]", "POST", "/v1/sinusoidal", lambda d: {"spec": d, "positions": [0, 7]},
               spec, None)
    for name, config in hf_configs().items():
        yield (f"hf_config[{name}]", "POST", "/v1/rope/cos_sin", lambda d: {"hf_config": d, "positions": [3]},
               config, served_model)
    for name, table in TABLE_SPECS.items():
        yield f"PUT table[{name}]", "PUT", "/v1/tables/mutant", lambda d: d, table, None
    for name, spec in ALIBI_SPECS.items():
        yield (f"PUT alibi table[{name}]", "PUT", "/v1/tables/mutant",
               lambda d: {"encoding": {"kind": "alibi", **d}, "stop": 8}, spec, None)
    yield "alibi_slopes", "POST", "/v1/alibi/slopes", lambda d: d, ALIBI_SLOPES_ARGS, None
    yield "alibi_bias", "POST", "/v1/alibi/bias", lambda d: d, ALIBI_BIAS_ARGS, None
    yield "t5_buckets", "POST", "/v1/t5/buckets", lambda d: d, T5_ARGS, None


REQUESTS = list(_requests())


@pytest.mark.parametrize("name,method,path,body,doc,read", REQUESTS, ids=[r[0] for r in REQUESTS])
def test_mutations_get_a_4xx_naming_a_field_never_a_500(client, name, method, path, body, doc, read):
    """Every key x every value of JSON_VALUES; a config key the service never reads (`read` unchanged
    by every value) gets one value of each JSON type instead (test_spec_mutation still gives it all)."""
    unread = unread_paths(doc, read) if read is not None else frozenset()
    labels, candidates = zip(*mutations(doc, unread=unread))
    headers = {"Content-Type": "application/json", **KEY}
    responses = request_all(client, [(method, path, orjson.dumps(body(candidate)), headers)
                                     for candidate in candidates])
    bad = []
    for label, r in zip(labels, responses):
        if r.status_code >= 500 or r.status_code not in (200, 201, 400, 404, 409, 413, 422):
            bad.append(f"{label}: {r.status_code} {r.text[:150]}")
        elif r.status_code >= 400:
            error = r.json()["error"]
            if not error["field"] or not error["message"] or error["request_id"] != r.headers["x-request-id"]:
                bad.append(f"{label}: {r.status_code} without a field: {error}")
    assert not bad, f"{len(bad)} mutations answered badly:\n" + "\n".join(bad[:30])


def test_metrics_count_no_500(client):
    text = client.get("/metrics").text
    assert 'status="500"' not in text


def test_only_keys_the_readers_ignore_are_thinned():
    """The keys a reader uses keep every value; the ones it never looks at are the ones thinned."""
    config = hf_configs()["llama-3.1-8b"]
    unread = unread_paths(config, served_model)
    for used in [("rope_theta",), ("rope_scaling", "factor"), ("rope_scaling", "rope_type"), ("model_type",),
                 ("num_attention_heads",), ("hidden_size",)]:
        assert used in key_paths(config) and used not in unread, used
    assert {("vocab_size",), ("architectures",)} <= unread
