"""Every route in-process (no sockets): each family and codec against the float64 oracle, table hits
and misses, table management, and an error body naming the field for every kind of bad input."""

import asyncio
import io
import subprocess
import sys

import httpx
import ml_dtypes
import numpy as np

import posenc
import posenc.native
import posenc.kernels.active
import orjson
import pytest
from conftest import DTYPES, assert_matches_oracle
from fastapi.testclient import TestClient
from shm_support import published_config
from posenc import reference
from posenc.config import ServiceConfig
from posenc.http import create_app
from posenc.encodings import RopeSpec
from prometheus_client.parser import text_string_to_metric_families

JSON, NPY, RAW = "application/json", "application/x-npy", "application/octet-stream"
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 256}
SIN64 = {"kind": "sinusoidal", "dim": 64}
ROPE32 = {"kind": "rope", "head_dim": 32, "base": 500000.0, "scaling": LLAMA3}
TABLES = [{"name": "sin64", "encoding": SIN64, "start": 0, "stop": 2048},
          {"name": "rope32", "encoding": ROPE32, "start": 0, "stop": 2048}]
EXTRA = {"name": "sin16d", "encoding": {"kind": "sinusoidal", "dim": 16, "layout": "halves"}, "start": -100,
         "stop": 100, "dtype": "float64"}
KEY = {"Authorization": "Bearer secret"}


def service_config(root: str, **limits) -> ServiceConfig:
    return ServiceConfig.from_dict({
        "server": {"shm_dir": root, "body_timeout_s": 0.5},
        "limits": {"max_positions": 5000, "max_body_bytes": 1 << 20, "max_output_bytes": 8 << 20, **limits},
        "tables": TABLES, "api_key": "secret"})


@pytest.fixture(scope="module")
def root():
    with published_config("posenc-http-test-", service_config) as (config, store):
        store.publish(EXTRA["name"], ServiceConfig.from_dict({"tables": [EXTRA]}).tables[0].spec)
        yield config.server.shm_dir


@pytest.fixture(scope="module")
def client(root):
    with TestClient(create_app(service_config(root))) as c:
        yield c


def array_of(response) -> np.ndarray:
    """The array in a 200 response, whatever its media type (JSON nulls read as -inf)."""
    assert response.status_code == 200, response.text
    kind = response.headers["content-type"]
    if kind == JSON:
        doc = response.json()
        data = np.array(doc["data"], dtype=object)
        data[data == None] = -np.inf
        return data.astype(np.float64).reshape(doc["shape"])
    dtype = response.headers["x-posenc-dtype"]
    shape = [int(s) for s in response.headers["x-posenc-shape"].split(",") if s]
    if kind == NPY:
        arr = np.load(io.BytesIO(response.content), allow_pickle=False)
        assert arr.dtype.name == dtype and list(arr.shape) == shape
        return arr
    np_dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype
    return np.frombuffer(response.content, dtype=np.dtype(np_dtype).newbyteorder("<")).reshape(shape)


def npy(arr) -> bytes:
    out = io.BytesIO()
    np.save(out, arr)
    return out.getvalue()


def hits(client) -> dict:
    for family in text_string_to_metric_families(client.get("/metrics").text):
        if family.name == "posenc_table_requests":
            return {s.labels["result"]: s.value for s in family.samples if s.name.endswith("_total")}
    return {}


def rope_reference(spec: dict, positions, seq_len=None):
    rope = RopeSpec.from_dict(spec)
    inv, attention = rope.inv_freq(seq_len)
    return reference.rope_cos_sin(positions, inv, attention)


# --- health, docs ---------------------------------------------------------------------------------
def test_health_ready_docs(client):
    health = client.get("/healthz").json()
    assert health["status"] == "ok"
    assert health["kernel_path"] == posenc.kernels.active.NAME
    assert health["cpu_features"] == posenc.native.cpu_features()
    assert client.get("/readyz").json() == {"status": "ready", "missing_tables": []}
    assert "swagger" in client.get("/docs").text.lower()
    paths = client.get("/openapi.json").json()["paths"]
    for path in ("/v1/sinusoidal", "/v1/rope/cos_sin", "/v1/rope/apply", "/v1/rope/inv_freq", "/v1/alibi/slopes",
                 "/v1/alibi/bias", "/v1/t5/buckets", "/v1/tables", "/v1/tables/{name}", "/v1/tables/{name}/rows",
                 "/v1/tables/{name}/rows/{position}", "/healthz", "/readyz", "/metrics"):
        assert path in paths, path
    assert {"get", "put", "delete"} <= set(paths["/v1/tables/{name}"])


def test_the_root_says_where_the_pages_are(client):
    """GET / was a 404: a browser or curl pointed at the bare address now learns where the docs,
    the explorer and the probes are, and every path it names answers."""
    index = client.get("/")
    assert index.status_code == 200 and index.json()["service"] == "posenc"
    paths = [link["path"] for link in index.json()["links"]]
    assert {"/docs", "/explore", "/openapi.json", "/healthz"} <= set(paths)
    for path in paths:
        assert client.get(path).status_code == 200, path
    assert client.head("/").status_code == 200
    assert {"get", "head"} <= set(client.get("/openapi.json").json()["paths"]["/"])


# --- encodings from specs -------------------------------------------------------------------------
@pytest.mark.parametrize("accept, dtype", [(a, d) for a in (JSON, NPY, RAW) for d in DTYPES
                                           if (a, d) != (NPY, "bfloat16")])  # no npy type: see below
def test_sinusoidal_spec_matches_oracle(client, accept, dtype):
    positions = [0, 1, 2.5, 1000, 99999.25, 2**20]
    spec = {"dim": 33, "layout": "t2t"}
    r = client.post("/v1/sinusoidal", json={"spec": spec, "positions": positions, "dtype": dtype},
                    headers={"Accept": accept})
    out = array_of(r)
    assert_matches_oracle(out, reference.sinusoidal(positions, 33, layout="t2t"), dtype, angle_max=2.0**20)


def test_bfloat16_npy_is_refused_naming_dtype(client):
    r = client.post("/v1/sinusoidal", json={"spec": SIN64, "positions": [1], "dtype": "bfloat16"},
                    headers={"Accept": NPY})
    assert r.status_code == 422 and r.json()["error"]["field"] == "dtype"


@pytest.mark.parametrize("body, content_type, query", [
    (np.array([3, 70000, -5], "<i8").tobytes(), RAW, {}),
    (np.array([3, 70000, -5], "<f8").tobytes(), RAW, {"positions_dtype": "float64"}),
    (npy(np.array([3, 70000, -5], np.int32)), NPY, {}),
    (npy(np.array([3.0, 70000.0, -5.0])), NPY, {}),
])
def test_binary_positions_with_query_parameters(client, body, content_type, query):
    params = {"spec": '{"dim": 64, "layout": "halves"}', "dtype": "float64", **query}
    r = client.post("/v1/sinusoidal", content=body, params=params,
                    headers={"Content-Type": content_type, "Accept": RAW})
    assert_matches_oracle(array_of(r), reference.sinusoidal([3, 70000, -5], 64, layout="halves"), "float64",
                          angle_max=70000)


def test_rope_cos_sin_from_spec_and_hf_config(client):
    positions = [0, 7, 300.5, 4095]
    spec = dict(ROPE32)
    spec.pop("kind")
    expected = np.concatenate(rope_reference(ROPE32, positions), axis=1)
    out = array_of(client.post("/v1/rope/cos_sin", json={"spec": spec, "positions": positions}))
    assert out.shape == (4, 32)
    assert_matches_oracle(out, expected, "float32")
    hf = {"hidden_size": 128, "num_attention_heads": 4, "rope_theta": 500000.0, "rope_scaling": LLAMA3,
          "max_position_embeddings": 4096}
    out = array_of(client.post("/v1/rope/cos_sin", json={"hf_config": hf, "positions": positions},
                               headers={"Accept": RAW}))
    assert_matches_oracle(out, expected, "float32")


def test_length_dependent_rope_uses_seq_len(client):
    spec = {"head_dim": 16, "scaling": {"rope_type": "dynamic", "factor": 4.0}, "max_position_embeddings": 64}
    positions = [0, 10, 100]
    for seq_len in (None, 500.0):
        body = {"spec": spec, "positions": positions, "dtype": "float64"}
        if seq_len:
            body["seq_len"] = seq_len
        expected = np.concatenate(rope_reference(spec, positions, seq_len or 101.0), axis=1)
        assert_matches_oracle(array_of(client.post("/v1/rope/cos_sin", json=body)), expected, "float64",
                              angle_max=100)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_rope_apply_npy_and_json(client, layout):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 5, 32)).astype(np.float32)
    cos, sin = rope_reference(ROPE32, np.arange(100, 105))
    expected = reference.rope_apply(x, cos, sin, layout=layout)
    r = client.post("/v1/rope/apply", content=npy(x), params={"table": "rope32", "offset": 100, "layout": layout},
                    headers={"Content-Type": NPY, "Accept": NPY})
    out = array_of(r)
    assert out.dtype == np.float32 and out.shape == x.shape
    assert_matches_oracle(out, expected, "float32", amplitude=4 * np.abs(x).max())
    r = client.post("/v1/rope/apply", json={"x": x.tolist(), "positions": list(range(100, 105)), "layout": layout,
                                            "spec": {k: v for k, v in ROPE32.items() if k != "kind"}})
    assert_matches_oracle(array_of(r), expected, "float64", amplitude=4 * np.abs(x).max(), angle_max=105)


def test_rope_inv_freq_and_attention_factor(client):
    doc = client.post("/v1/rope/inv_freq", json={"spec": {"head_dim": 16, "base": 10000.0}}).json()
    assert doc["dtype"] == "float64" and doc["attention_factor"] == 1.0
    np.testing.assert_allclose(doc["data"], 1.0 / 10000.0 ** (np.arange(0, 16, 2) / 16), rtol=1e-15)
    yarn = {"head_dim": 64, "scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}}
    r = client.post("/v1/rope/inv_freq", json={"spec": yarn}, headers={"Accept": RAW})
    inv, attention = RopeSpec.from_dict(yarn).inv_freq()
    assert float(r.headers["x-posenc-attention-factor"]) == attention == pytest.approx(0.1 * np.log(4) + 1)
    assert np.array_equal(array_of(r), inv)


@pytest.mark.parametrize("variant", ["paper", "bloom", "mpt"])
def test_alibi_slopes(client, variant):
    out = array_of(client.post("/v1/alibi/slopes", json={"n_heads": 12, "variant": variant}))
    assert np.array_equal(out, posenc.alibi_slopes(12, variant=variant))  # the library's, bit for bit
    # the paper's code multiplies running products (~1e-16 of rounding); posenc uses the closed form. BLOOM
    # and MPT raise float32 bases to float32 powers: posenc rounds each once (correctly rounded powf), the
    # reference port calls numpy's float32 power (SVML on AVX-512 hosts), up to an ulp of float32 apart
    rtol = 2e-14 if variant == "paper" else 2.0**-23
    np.testing.assert_allclose(out, reference.alibi_slopes(12, variant), rtol=rtol)


@pytest.mark.parametrize("accept", [JSON, RAW])
@pytest.mark.parametrize("mode", ["causal", "symmetric", "bloom"])
def test_alibi_bias_block(client, accept, mode):
    body = {"n_heads": 6, "q_len": 4, "k_len": 7, "q_offset": 100, "k_offset": 97, "mode": mode}
    out = array_of(client.post("/v1/alibi/bias", json=body, headers={"Accept": accept}))
    expected = reference.alibi_bias(reference.alibi_slopes(6), np.arange(100, 104), np.arange(97, 104), mode)
    assert out.shape == (6, 4, 7)
    assert np.array_equal(np.isneginf(out), np.isneginf(expected))  # JSON null <-> -inf
    finite = np.isfinite(expected)
    assert_matches_oracle(out[finite], expected[finite], "float32", amplitude=10.0)


def test_t5_buckets_json_and_binary(client):
    rel = np.arange(-300, 300, 7).reshape(2, -1)
    for bidirectional in (True, False):
        expected = reference.t5_relative_position_bucket(rel, bidirectional)
        doc = client.post("/v1/t5/buckets", json={"relative_position": rel.tolist(),
                                                  "bidirectional": bidirectional}).json()
        assert doc["dtype"] == "int64" and np.array_equal(doc["data"], expected)
        r = client.post("/v1/t5/buckets", content=rel.ravel().astype("<i8").tobytes(),
                        params={"bidirectional": str(bidirectional).lower(), "num_buckets": 32},
                        headers={"Content-Type": RAW, "Accept": RAW})
        assert np.array_equal(array_of(r), expected.ravel())


# --- tables: hits, misses, rows -----------------------------------------------------------------
def test_spec_requests_hit_a_covering_table_else_compute(client):
    table = array_of(client.post("/v1/tables/sin64/rows", json={"positions": list(range(2048))},
                                 headers={"Accept": RAW}))
    before = hits(client)
    positions = [0, 5, 2047, 1000]
    hit = array_of(client.post("/v1/sinusoidal", json={"spec": {"dim": 64}, "positions": positions},
                               headers={"Accept": RAW}))
    assert np.array_equal(hit, table[positions])
    after = hits(client)
    assert after["hit"] == before["hit"] + 1 and after["miss"] == before["miss"]
    for miss in ({"positions": [0, 2048]}, {"positions": [0.5]}, {"positions": [1], "dtype": "float64"},
                 {"positions": [1], "spec": {"dim": 64, "base": 10001.0}}):
        body = {"spec": {"dim": 64}, **miss}
        out = array_of(client.post("/v1/sinusoidal", json=body))
        spec = body["spec"]
        assert_matches_oracle(out, reference.sinusoidal(body["positions"], 64, base=spec.get("base", 10000.0)),
                              body.get("dtype", "float32"), angle_max=2048)
    assert hits(client)["miss"] == after["miss"] + 4


def test_named_table_requests(client):
    positions = [3, 1999, 0]
    expected = reference.sinusoidal(positions, 64)
    assert_matches_oracle(array_of(client.post("/v1/sinusoidal", json={"table": "sin64", "positions": positions})),
                          expected, "float32", angle_max=2048)
    out = array_of(client.post("/v1/sinusoidal", json={"table": "sin64", "positions": positions,
                                                        "dtype": "float16"}, headers={"Accept": NPY}))
    assert out.dtype == np.float16
    assert_matches_oracle(out, expected, "float16")
    rope = array_of(client.post("/v1/rope/cos_sin", json={"table": "rope32", "positions": positions}))
    assert_matches_oracle(rope, np.concatenate(rope_reference(ROPE32, positions), axis=1), "float32")
    on_demand = array_of(client.post("/v1/tables/sin16d/rows", json={"positions": [-100, 0, 99]}))
    assert_matches_oracle(on_demand, reference.sinusoidal([-100, 0, 99], 16, layout="halves"), "float64",
                          angle_max=100)


@pytest.mark.parametrize("body, content_type", [
    (orjson.dumps({"positions": [5, 17, 2000]}), JSON),
    (np.array([5, 17, 2000], "<i8").tobytes(), RAW),
    (npy(np.array([5, 17, 2000], np.uint16)), NPY),
])
def test_batch_rows_every_body_format(client, body, content_type):
    r = client.post("/v1/tables/sin64/rows", content=body, headers={"Content-Type": content_type, "Accept": RAW})
    assert_matches_oracle(array_of(r), reference.sinusoidal([5, 17, 2000], 64), "float32", angle_max=2048)


@pytest.mark.parametrize("query", ["", "?dtype=float32", "?dtype=float16", "?dtype=bfloat16", "?dtype=float64"])
@pytest.mark.parametrize("accept", [JSON, RAW, NPY])
def test_single_row_fast_path_equals_the_fastapi_route(client, accept, query):
    fast = client.get(f"/v1/tables/sin64/rows/1234{query}", headers={"Accept": accept})
    slow = TestClient(client.app.api).get(f"/v1/tables/sin64/rows/1234{query}", headers={"Accept": accept})
    refused = query == "?dtype=float64" or (query, accept) == ("?dtype=bfloat16", NPY)  # wider than stored; no .npy
    wider = query == "?dtype=float64"  # the table's state refuses it: 409; .npy cannot hold bfloat16: 422
    assert fast.status_code == slow.status_code == (409 if wider else 422 if refused else 200), fast.text
    if refused:
        return
    assert fast.content == slow.content
    for name in ("content-type", "x-posenc-shape", "x-posenc-dtype"):
        assert fast.headers.get(name) == slow.headers.get(name), name
    dtype = query.partition("=")[2] or "float32"
    assert_matches_oracle(array_of(fast), reference.sinusoidal([1234], 64)[0], dtype, angle_max=2048)
    negative = array_of(client.get("/v1/tables/sin16d/rows/-7", headers={"Accept": accept}))
    assert_matches_oracle(negative, reference.sinusoidal([-7], 16, layout="halves")[0], "float64", angle_max=100)


def test_table_listing_and_management(client, root):
    names = {t["name"] for t in client.get("/v1/tables").json()["tables"]}
    assert {"sin64", "rope32", "sin16d"} <= names
    info = client.get("/v1/tables/sin64").json()
    assert info["shape"] == [2048, 64] and info["state"] == "READY" and info["spec"]["encoding"]["dim"] == 64
    spec = {"encoding": {"kind": "sinusoidal", "dim": 8}, "start": 10, "stop": 20}
    assert client.put("/v1/tables/made", json=spec).status_code == 401
    assert client.put("/v1/tables/made", json=spec, headers={"Authorization": "Bearer nope"}).status_code == 401
    assert client.put("/v1/tables/sin64", json=spec, headers=KEY).json()["error"]["code"] == "conflict"
    r = client.put("/v1/tables/made", json=spec, headers=KEY)
    assert r.status_code == 201 and r.json()["shape"] == [10, 8]
    assert_matches_oracle(array_of(client.get("/v1/tables/made/rows/15")), reference.sinusoidal([15], 8)[0],
                          "float32")
    replaced = client.put("/v1/tables/made", json={**spec, "stop": 30}, headers=KEY).json()
    assert replaced["shape"] == [20, 8] and replaced["generation"] > r.json()["generation"]
    assert client.get("/v1/tables/made/rows/25").status_code == 200
    assert client.delete("/v1/tables/made", headers=KEY).status_code == 204
    assert client.get("/v1/tables/made/rows/15").json()["error"]["code"] == "not_found"
    assert client.delete("/v1/tables/made", headers=KEY).status_code == 404
    assert client.delete("/v1/tables/sin64", headers=KEY).status_code == 409


def test_table_management_is_off_without_an_api_key(root):
    config = service_config(root)
    config = ServiceConfig.from_dict({**config.to_dict(), "api_key": None})
    with TestClient(create_app(config)) as c:
        r = c.put("/v1/tables/x", json={"encoding": SIN64, "stop": 4}, headers=KEY)
        assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"


def test_not_ready_until_configured_tables_exist(root):
    config = ServiceConfig.from_dict({**service_config(root).to_dict(),
                                      "tables": [{"name": "ghost", "encoding": SIN64, "stop": 4}]})
    with TestClient(create_app(config)) as c:
        r = c.get("/readyz")
        assert r.status_code == 503 and r.json() == {"status": "not ready", "missing_tables": ["ghost"]}
        assert c.get("/healthz").status_code == 200


# --- errors ---------------------------------------------------------------------------------------
SPEC = {"spec": {"dim": 8}}
SPEC_QUERY = {"spec": '{"dim": 8}'}
BAD = [
    # (method, path, request kwargs, status, code, field)
    ("post", "/v1/sinusoidal", {"content": b"{", "headers": {"Content-Type": JSON}}, 400, "invalid_body", "body"),
    ("post", "/v1/sinusoidal", {"json": [1, 2]}, 400, "invalid_body", "body"),
    ("post", "/v1/sinusoidal", {"json": {**SPEC}}, 422, "invalid_parameter", "positions"),
    ("post", "/v1/sinusoidal", {"json": {**SPEC, "positions": [1], "colour": 1}}, 422, "invalid_parameter", "colour"),
    ("post", "/v1/sinusoidal", {"json": {**SPEC, "positions": [1], "dtype": "int8"}}, 422, "invalid_parameter",
     "dtype"),
    ("post", "/v1/sinusoidal", {"json": {"spec": {"dim": 0}, "positions": [1]}}, 422, "invalid_parameter",
     "spec.dim"),
    ("post", "/v1/sinusoidal", {"json": {"spec": {"base": 2.0}, "positions": [1]}}, 422, "invalid_parameter",
     "spec.dim"),
    ("post", "/v1/sinusoidal", {"json": {"spec": {"dim": 8, "layout": "x"}, "positions": [1]}}, 422,
     "invalid_parameter", "spec.layout"),
    ("post", "/v1/sinusoidal", {"json": {"positions": [1]}}, 422, "invalid_parameter", "spec"),
    ("post", "/v1/sinusoidal", {"json": {**SPEC, "table": "sin64", "positions": [1]}}, 422, "invalid_parameter",
     "spec"),
    ("post", "/v1/sinusoidal", {"json": {**SPEC, "positions": ["a"]}}, 422, "invalid_parameter", "positions"),
    ("post", "/v1/sinusoidal", {"json": {**SPEC, "positions": [[1, 2], [3]]}}, 422, "invalid_parameter",
     "positions"),
    ("post", "/v1/sinusoidal", {"json": {**SPEC, "positions": [1e300]}}, 422, "invalid_parameter", "positions"),
    ("post", "/v1/sinusoidal", {"json": {**SPEC, "positions": [2**70]}}, 422, "invalid_parameter", "positions"),
    ("post", "/v1/sinusoidal", {"json": {**SPEC, "positions": list(range(5001))}}, 413, "too_many_positions",
     "positions"),
    ("post", "/v1/sinusoidal", {"json": {"spec": {"dim": 4096}, "positions": list(range(4096))}}, 413,
     "output_too_large", "positions"),
    ("post", "/v1/sinusoidal", {"json": {**SPEC, "positions": [1], "dtype": "float64"},
                                "params": {"dtype": "float64"}}, 422, "invalid_parameter", "dtype"),  # given twice
    ("post", "/v1/sinusoidal", {"content": b"1234567", "headers": {"Content-Type": RAW}, "params": SPEC_QUERY}, 400,
     "invalid_body", "positions"),
    ("post", "/v1/sinusoidal", {"content": b"\x93NUMPY", "headers": {"Content-Type": NPY}}, 400, "invalid_body",
     "positions"),
    ("post", "/v1/sinusoidal", {"content": b"12345678", "headers": {"Content-Type": RAW},
                                "params": {"spec": "{nope"}}, 422, "invalid_parameter", "spec"),
    ("post", "/v1/sinusoidal", {"content": b"12345678", "headers": {"Content-Type": RAW},
                                "params": {"positions_dtype": "int8", **SPEC_QUERY}}, 422, "invalid_parameter",
     "positions_dtype"),
    ("post", "/v1/sinusoidal", {"content": b"x", "headers": {"Content-Type": "text/plain"}}, 415,
     "unsupported_media_type", "content-type"),
    ("post", "/v1/sinusoidal", {"json": {**SPEC, "positions": [1]}, "headers": {"Accept": "text/html"}}, 406,
     "not_acceptable", "accept"),
    ("post", "/v1/rope/cos_sin", {"json": {"positions": [1], "spec": {"head_dim": 8, "scaling": {
        "rope_type": "linear"}}}}, 422, "invalid_parameter", "spec.scaling.factor"),
    ("post", "/v1/rope/cos_sin", {"json": {"positions": [1], "spec": {"head_dim": 8, "scaling": {
        "rope_type": "warp"}}}}, 422, "invalid_parameter", "spec.scaling.rope_type"),
    ("post", "/v1/rope/cos_sin", {"json": {"positions": [1], "table": "sin64"}}, 422, "invalid_parameter", "table"),
    ("post", "/v1/rope/cos_sin", {"json": {"positions": [1], "table": "rope32", "seq_len": 5.0}}, 422,
     "invalid_parameter", "seq_len"),
    ("post", "/v1/rope/cos_sin", {"json": {"positions": [1], "hf_config": {"model_type": "llama", "head_dim": 0}}}, 422,
     "invalid_parameter", "hf_config.head_dim"),
    ("post", "/v1/rope/apply", {"json": {"spec": {"head_dim": 8}}}, 422, "invalid_parameter", "x"),
    ("post", "/v1/rope/apply", {"json": {"spec": {"head_dim": 8}, "x": [[1, 2, 3]]}}, 422, "invalid_parameter",
     "x"),
    ("post", "/v1/rope/apply", {"json": {"spec": {"head_dim": 2}, "x": [[1, 2]], "positions": [1, 2]}}, 422,
     "invalid_parameter", "positions"),
    ("post", "/v1/rope/apply", {"content": npy(np.zeros((2, 4))), "headers": {"Content-Type": NPY},
                                "params": {"spec": '{"head_dim": 4}', "dtype": "float32"}}, 422,
     "invalid_parameter", "dtype"),
    ("post", "/v1/alibi/slopes", {"json": {}}, 422, "invalid_parameter", "n_heads"),
    ("post", "/v1/alibi/slopes", {"json": {"n_heads": 0}}, 422, "invalid_parameter", "n_heads"),
    ("post", "/v1/alibi/slopes", {"json": {"n_heads": 8, "alibi_bias_max": 4}}, 422, "invalid_parameter",
     "alibi_bias_max"),
    ("post", "/v1/alibi/bias", {"json": {"n_heads": 64, "q_len": 2048, "k_len": 2048}}, 413, "output_too_large",
     "q_len"),
    ("post", "/v1/alibi/bias", {"json": {"n_heads": 2, "q_len": 2, "gamma": [1.0]}}, 422, "invalid_parameter",
     "gamma"),
    ("post", "/v1/t5/buckets", {"json": {"relative_position": [0.5]}}, 422, "invalid_parameter",
     "relative_position"),
    ("post", "/v1/t5/buckets", {"json": {"relative_position": [1], "num_buckets": 2}}, 422, "invalid_parameter",
     "num_buckets"),
    ("post", "/v1/tables/nope/rows", {"json": {"positions": [1]}}, 404, "not_found", "name"),
    ("post", "/v1/tables/a..b/rows", {"json": {"positions": [1]}}, 422, "invalid_parameter", "name"),
    ("post", "/v1/tables/sin64/rows", {"json": {"positions": [2048]}}, 422, "invalid_parameter", "positions"),
    ("post", "/v1/tables/sin64/rows", {"json": {"positions": [1.5]}}, 422, "invalid_parameter", "positions"),
    ("post", "/v1/tables/sin64/rows", {"json": {"positions": [1], "dtype": "float64"}}, 409, "conflict",
     "dtype"),  # wider than the table stores
    ("get", "/v1/tables/sin64/rows/2048", {}, 404, "not_found", "position"),  # past the table's last row
    ("get", "/v1/tables/sin64/rows/-1", {}, 404, "not_found", "position"),
    ("get", "/v1/tables/sin64/rows/99999999999999999999999", {}, 422, "invalid_parameter", "position"),
    ("get", "/v1/tables/sin64/rows/abc", {}, 422, "invalid_parameter", "position"),
    ("get", "/v1/tables/sin64/rows/1?dtype=int8", {}, 422, "invalid_parameter", "dtype"),
    ("get", "/v1/tables/nope", {}, 404, "not_found", "name"),
    ("put", "/v1/tables/new", {"json": {"encoding": SIN64, "stop": 4}}, 401, "unauthorized", "authorization"),
    ("put", "/v1/tables/new", {"json": {"encoding": {"kind": "banana"}, "stop": 4}, "headers": KEY}, 422,
     "invalid_parameter", "encoding.kind"),
    ("put", "/v1/tables/new", {"json": {"encoding": {"kind": "alibi"}, "stop": 4}, "headers": KEY}, 422,
     "invalid_parameter", "encoding.n_heads"),
    ("put", "/v1/tables/new", {"json": {"encoding": SIN64, "stop": 10**7}, "headers": KEY}, 413, "output_too_large",
     "stop"),
    ("put", "/v1/tables/a%2Fb", {"json": {"encoding": SIN64, "stop": 4}, "headers": KEY}, 404, "not_found", None),
    ("get", "/v1/sinusoidal", {}, 405, "method_not_allowed", None),
    ("get", "/nowhere", {}, 404, "not_found", None),
]


@pytest.mark.parametrize("method, path, kwargs, status, code, field", BAD,
                         ids=[f"{b[1]}-{b[3]}-{b[5]}-{i}" for i, b in enumerate(BAD)])
def test_bad_input_gets_a_clear_error(client, method, path, kwargs, status, code, field):
    r = client.request(method.upper(), path, **kwargs)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert (error["code"], error["field"]) == (code, field), error
    assert error["message"]


def test_body_over_the_limit_is_refused_before_reading(client):
    big = b"0" * ((1 << 20) + 1)
    r = client.post("/v1/sinusoidal", content=big, headers={"Content-Type": RAW})
    error = r.json()["error"]
    assert r.status_code == 413 and error == {
        "code": "body_too_large", "message": "request body is over the limit of 1048576 bytes", "field": "body",
        "request_id": r.headers["x-request-id"]}

    def chunks():  # no Content-Length: counted while streaming
        for _ in range(20):
            yield b"0" * (64 << 10)

    r = client.post("/v1/sinusoidal", content=chunks(), headers={"Content-Type": RAW})
    assert r.status_code == 413 and r.headers["connection"] == "close"


def test_metrics_count_every_route(client):
    client.get("/v1/tables/sin64/rows/3", headers={"Accept": RAW})
    text = client.get("/metrics").text
    counts = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "posenc_http_requests_total":
                counts[(s.labels["method"], s.labels["route"], s.labels["status"])] = s.value
    assert counts[("GET", "/v1/tables/{name}/rows/{position}", "200")] >= 1
    assert counts[("POST", "/v1/sinusoidal", "200")] >= 1
    assert counts[("POST", "/v1/sinusoidal", "422")] >= 1
    assert 'le="1e-05"' in text and "posenc_http_response_bytes_total" in text


# --- limits that need concurrency -----------------------------------------------------------------
def _gated(api, path: str, gate: asyncio.Event):
    """The FastAPI app, except that requests to `path` wait for `gate` first: a slow handler on demand."""
    async def app(scope, receive, send):
        if scope.get("path") == path:
            await gate.wait()
        await api(scope, receive, send)
    return app


def test_concurrency_limit_spares_health_and_stalled_bodies_hold_no_slot(root):
    """max_concurrency=1. A request whose body stalls holds no slot: others are answered meanwhile, and it
    gets 408 when body_timeout_s (0.5 s) runs out. A request that is running holds the one slot: the next
    /v1 request gets 429 at once, but /healthz, /readyz and /metrics are still answered."""

    async def scenario():
        app = create_app(service_config(root, max_concurrency=1))
        await app.service.start()
        gate = asyncio.Event()
        app.api = _gated(app.api, "/v1/tables", gate)  # a FastAPI route: fastcompute answers computed ones itself
        try:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c:
                async def stalled_body():
                    yield np.array([1], "<i8").tobytes()
                    await asyncio.Event().wait()  # never sends the rest

                stalled = asyncio.create_task(c.post("/v1/tables/sin64/rows", content=stalled_body(),
                                                     headers={"Content-Type": RAW}))
                await asyncio.sleep(0.1)
                assert app.service.in_flight == 0
                assert (await c.post("/v1/tables/sin64/rows", json={"positions": [1]})).status_code == 200
                timed_out = await stalled
                assert timed_out.status_code == 408 and timed_out.json()["error"]["field"] == "body"

                running = asyncio.create_task(c.get("/v1/tables"))
                while app.service.in_flight == 0:
                    await asyncio.sleep(0.01)
                refused = await c.get("/v1/tables/sin64/rows/1")
                assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
                assert refused.json()["error"]["code"] == "too_many_requests"
                assert (await c.post("/v1/sinusoidal", json={"spec": {"dim": 4}, "positions": [1]})).status_code == 429
                for path in ("/healthz", "/readyz", "/metrics"):
                    assert (await c.get(path)).status_code == 200, path
                assert (await c.head("/healthz")).status_code == 200
                gate.set()
                assert (await running).status_code == 200
                assert app.service.in_flight == 0
                assert (await c.get("/v1/tables/sin64/rows/1")).status_code == 200
        finally:
            await app.service.stop()

    asyncio.run(scenario())


WARM_CHECK = r"""
import sys, numpy as np
from fastapi.testclient import TestClient
from numba.core.registry import CPUDispatcher
from posenc.config import ServiceConfig
from posenc.http import create_app

def signatures():
    found = {}
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("posenc"):
            for obj in vars(module).values():
                if isinstance(obj, CPUDispatcher):
                    found[obj.py_func.__qualname__] = len(obj.signatures)
    return found

config = ServiceConfig.from_dict(__CONFIG__)
with TestClient(create_app(config)) as c:
    warm = signatures()
    raw = {"Accept": "application/octet-stream"}
    for dtype in ("float32", "float64", "float16", "bfloat16"):
        assert c.post("/v1/sinusoidal", json={"spec": {"dim": 12}, "positions": [0, 2.5, 9], "dtype": dtype},
                      headers=raw).status_code == 200
        assert c.post("/v1/rope/cos_sin", json={"spec": {"head_dim": 16}, "positions": [1, 7], "dtype": dtype},
                      headers=raw).status_code == 200
        assert c.post("/v1/alibi/bias", json={"n_heads": 4, "q_len": 5, "dtype": dtype}).status_code == 200
        table_dtype = "float32" if dtype == "float64" else dtype  # no wider than the table
        assert c.post("/v1/sinusoidal", json={"table": "sin64", "positions": [1], "dtype": table_dtype},
                      headers=raw).status_code == 200
    for x_dtype in (np.float32, np.float64, np.float16):
        body = {"spec": {"head_dim": 4}, "x": np.ones((2, 3, 4)).tolist(), "dtype": np.dtype(x_dtype).name}
        assert c.post("/v1/rope/apply", json=body).status_code == 200
    assert c.post("/v1/t5/buckets", json={"relative_position": [[-5, 9]], "bidirectional": False}).status_code == 200
    assert c.post("/v1/tables/rope32/rows", json={"positions": [3, 4]}).status_code == 200
    assert c.get("/v1/tables/sin64/rows/9?dtype=float16").status_code == 200
    assert c.post("/v1/rope/inv_freq", json={"table": "rope32"}).status_code == 200
    after = signatures()
    compiled = {name: after[name] - warm.get(name, 0) for name in after if after[name] != warm.get(name, 0)}
    assert not compiled, f"kernels compiled by requests after warm-up: {compiled}"
print("no request compiled a kernel")
"""


def test_no_request_compiles_a_kernel_after_startup(root):
    """In a fresh process (numba dispatchers are per process): after the app's startup warm-up, requests
    of every family and dtype add no kernel signature, i.e. nobody pays a JIT compile."""
    script = WARM_CHECK.replace("__CONFIG__", repr(service_config(root).to_dict()))
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
