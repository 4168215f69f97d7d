"""The spec and config fixtures of test_spec_mutation, mutated the same way (every key, every JSON type,
extreme numbers, removed), sent to every route that takes them, PUT /v1/tables included: the answer
is 200/201 or a 4xx error body naming a field; never a 500. In-process (no sockets), about 9k requests."""

import shutil
import tempfile

import orjson
import pytest
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
    mutations,
)

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


def _requests():
    """(name, method, path, body builder from the mutated doc, the doc) for every fixture and route."""
    for name, spec in ROPE_SPECS.items():
        yield f"inv_freq[{name}]", "POST", "/v1/rope/inv_freq", lambda d: {"spec": d, "seq_len": 4096}, spec
        yield f"cos_sin[{name}]", "POST", "/v1/rope/cos_sin", lambda d: {"spec": d, "positions": [0, 1, 5]}, spec
    for name, spec in SINUSOIDAL_SPECS.items():
        yield f"sinusoidal[{name}]", "POST", "/v1/sinusoidal", lambda d: {"spec": d, "positions": [0, 7]}, spec
    for name, config in hf_configs().items():
        yield f"hf_config[{name}]", "POST", "/v1/rope/cos_sin", lambda d: {"hf_config": d, "positions": [3]}, config
    for name, table in TABLE_SPECS.items():
        yield f"PUT table[{name}]", "PUT", "/v1/tables/mutant", lambda d: d, table
    for name, spec in ALIBI_SPECS.items():
        yield f"PUT alibi table[{name}]", "PUT", "/v1/tables/mutant", lambda d: {"encoding": {"kind": "alibi", **d},
                                                                                 "stop": 8}, spec
    yield "alibi_slopes", "POST", "/v1/alibi/slopes", lambda d: d, ALIBI_SLOPES_ARGS
    yield "alibi_bias", "POST", "/v1/alibi/bias", lambda d: d, ALIBI_BIAS_ARGS
    yield "t5_buckets", "POST", "/v1/t5/buckets", lambda d: d, T5_ARGS


REQUESTS = list(_requests())


@pytest.mark.parametrize("name,method,path,body,doc", REQUESTS, ids=[r[0] for r in REQUESTS])
def test_mutations_get_a_4xx_naming_a_field_never_a_500(client, name, method, path, body, doc):
    bad = []
    for label, candidate in mutations(doc):
        r = client.request(method, path, content=orjson.dumps(body(candidate)),
                           headers={"Content-Type": "application/json", **KEY})
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
