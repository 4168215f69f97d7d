"""The HTTP API against its own OpenAPI document (issue 38, item 8).

schemathesis, from its own venv (`make schemathesis`; its pins stay out of posenc's), runs its CLI
with every check against a real `posenc serve`: no 500s; every status, content type, header and
body as documented; requests valid by the schema accepted and invalid ones refused
(positive_data_acceptance, negative_data_rejection: schemathesis.toml says where a schema cannot
state the library's rules); auth, methods and resources as declared. Bounded: a fixed seed and
ST_EXAMPLES cases per operation. The in-process tests pin the rules the run found broken: every
$ref resolves, and a request's fields may sit in the query beside a JSON body, nulls are fields
not given, integral floats are integers, an empty X-Request-Id is none.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest
from conftest import by_profile
from fastapi.testclient import TestClient
from posenc.config import ServiceConfig
from posenc.http import create_app
from serve_support import served

ROOT = Path(__file__).resolve().parent.parent
ST = ROOT / ".venv-schemathesis" / "bin" / "st"
#: Cases per operation (the whole run: ~1 minute on 2 cores; `thorough`: ~6).
ST_EXAMPLES = by_profile(25, 150)
ST_SEED = 38
API_KEY = "fuzz"
CONFIG = """
[server]
workers = 1
binary_port = 0
shm_dir = "{shm_dir}"
[limits]
max_positions = 4096
max_output_bytes = 4194304
[[tables]]
name = "sin64"
encoding = {{ kind = "sinusoidal", dim = 64 }}
stop = 4096
"""


def test_schemathesis_finds_no_failure(tmp_path):
    if not ST.exists():
        pytest.skip("schemathesis' venv is missing: `make schemathesis` (make test builds it)")
    with served(lambda shm_dir: CONFIG.format(shm_dir=shm_dir), env={"POSENC_API_KEY": API_KEY},
                prefix="posenc-schemathesis-") as server:
        # --workers 1: schemathesis' threads race in hypothesis' lambda-source cache (a "Runtime Error")
        run = subprocess.run(
            [str(ST), "--config-file", str(ROOT / "schemathesis.toml"), "run", f"{server.url}/openapi.json",
             "--checks", "all", "--seed", str(ST_SEED), "--max-examples", str(ST_EXAMPLES), "--workers", "1",
             "--header", f"Authorization: Bearer {API_KEY}", "--report-dir", str(tmp_path), "--no-color"],
            cwd=ROOT, capture_output=True, text=True, timeout=900)
        server_log = server.log()
    assert run.returncode == 0, f"schemathesis (exit {run.returncode}):\n{run.stdout}\n{run.stderr}\n" \
                                f"server log:\n{server_log[-4000:]}"
    assert "Unresolvable" not in run.stdout, run.stdout


def test_the_allowances_are_for_request_bodies_only():
    """schemathesis.toml widens positive_data_acceptance only for operations that exist and take a
    body (what a JSON Schema cannot say is in a spec, a file, a table's range); every other one, the
    row route included (404: no such row, 409: a dtype wider than stored), is held to the defaults."""
    import tomllib
    allowed = {name for entry in tomllib.loads((ROOT / "schemathesis.toml").read_text())["operations"]
               for name in entry["include-name"]}
    paths = create_app(ServiceConfig()).api.openapi()["paths"]
    for name in allowed:
        method, path = name.split(" ", 1)
        assert "requestBody" in paths[path][method.lower()], name
    assert "GET /v1/tables/{name}/rows/{position}" not in allowed


def _references(node):
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            yield node["$ref"]
        for value in node.values():
            yield from _references(value)
    elif isinstance(node, list):
        for value in node:
            yield from _references(value)


def test_every_reference_in_the_openapi_document_resolves():
    document = create_app(ServiceConfig()).api.openapi()
    references = set(_references(document))
    assert "#/components/schemas/FigureRequest" in references  # the two that did not resolve (issue 38)
    assert "#/components/schemas/AuditFigureRequest" in references
    for reference in references:
        assert reference.startswith("#/"), reference
        node = document
        for part in reference[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            assert isinstance(node, dict) and part in node, f"{reference} does not resolve"
            node = node[part]


@pytest.fixture(scope="module")
def client():
    root = tempfile.mkdtemp(prefix="posenc-conformance-", dir="/dev/shm")
    try:
        config = ServiceConfig.from_dict({"server": {"shm_dir": root}, "api_key": API_KEY})
        with TestClient(create_app(config)) as c:
            yield c
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _error(response):
    return response.status_code, response.json()["error"]["field"]


def test_query_fields_go_beside_a_json_body_once(client):
    spec = {"dim": 8}
    alone = client.post("/v1/sinusoidal", json={"spec": spec, "positions": [0, 3]})
    beside = client.post("/v1/sinusoidal", params={"dtype": "float64"},
                         json={"spec": spec, "positions": [0, 3]})
    assert beside.status_code == 200 and beside.json()["dtype"] == "float64"
    assert np.allclose(beside.json()["data"], alone.json()["data"], atol=1e-7)
    twice = client.post("/v1/sinusoidal", params={"dtype": "float64"},
                        json={"spec": spec, "positions": [0, 3], "dtype": "float32"})
    assert _error(twice) == (422, "dtype")
    assert _error(client.post("/v1/t5/buckets", params={"num_buckets": "yes"},
                              json={"relative_position": [1]})) == (422, "num_buckets")


def test_a_null_is_a_field_not_given(client):
    table = client.put("/v1/tables/nulls", headers={"Authorization": f"Bearer {API_KEY}"},
                       json={"encoding": {"kind": "sinusoidal", "dim": 8}, "start": None, "stop": 16,
                             "seq_len": None})
    assert table.status_code == 201 and table.json()["spec"]["start"] == 0, table.text
    rows = client.post("/v1/sinusoidal", json={"spec": {"dim": 8}, "positions": [1], "table": None})
    assert rows.status_code == 200
    no_positions = client.post("/v1/sinusoidal", json={"spec": {"dim": 8}, "positions": None})
    assert _error(no_positions) == (422, "positions")


def test_an_integral_float_is_an_integer(client):
    r = client.post("/v1/alibi/slopes", json={"n_heads": 4.0})
    assert r.status_code == 200 and r.json()["shape"] == [4]
    assert _error(client.post("/v1/alibi/slopes", json={"n_heads": 4.5})) == (422, "n_heads")
    assert _error(client.post("/v1/alibi/slopes", json={"n_heads": True})) == (422, "n_heads")


def test_one_source_and_layer_type_only_with_hf_config(client):
    both = client.post("/v1/rope/inv_freq", json={"spec": {"head_dim": 8}, "table": "t"})
    assert both.status_code == 422 and "exactly one of" in both.json()["error"]["message"]
    assert _error(client.post("/v1/rope/inv_freq", json={"spec": {"head_dim": 8}, "layer_type": "x"})) \
        == (422, "layer_type")


def test_an_empty_request_id_is_none(client):
    r = client.get("/healthz", headers={"X-Request-Id": ""})
    assert r.status_code == 200 and len(r.headers["x-request-id"]) == 16
    assert _error(client.get("/healthz", headers={"X-Request-Id": "a b"}))[0] == 422
