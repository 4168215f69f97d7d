"""Regression tests for the HTTP review (issue 12): the inputs that gave 500s, loose typing, messages,
response size and memory, offline docs, OpenAPI honesty and the serving features (request ids, HEAD,
gzip, /info, API key on every route, CORS). In-process unless a real socket is the point."""

import io
import logging
import re
import shutil
import socket
import tempfile
import time

import httpx
import numpy as np
import orjson
import pytest
from fastapi.testclient import TestClient
from shm_support import published_config
from prometheus_client.parser import text_string_to_metric_families

import posenc
from posenc.config import ServiceConfig
from posenc.http import create_app
from posenc.http.runtime.launch import ServerProcess
from posenc.http.api.responses import GZIP_MIN_BYTES, STREAM_BYTES, json_pieces

NPY, RAW = "application/x-npy", "application/octet-stream"
ROPE = {"kind": "rope", "head_dim": 16}
TABLES = [{"name": "sin128", "encoding": {"kind": "sinusoidal", "dim": 128}, "stop": 1024},
          {"name": "rope16", "encoding": ROPE, "stop": 64},
          {"name": "sin1024", "encoding": {"kind": "sinusoidal", "dim": 1024}, "stop": 8}]


def config(root: str, server: dict | None = None, **limits) -> ServiceConfig:
    return ServiceConfig.from_dict({"server": {"shm_dir": root, **(server or {})},
                                    "limits": {"max_output_bytes": 8 << 20, **limits},
                                    "tables": TABLES, "api_key": "secret"})


@pytest.fixture(scope="module")
def root():
    with published_config("posenc-hardening-", config) as (served, _):
        yield served.server.shm_dir


@pytest.fixture(scope="module")
def client(root):
    with TestClient(create_app(config(root)), raise_server_exceptions=False) as c:
        yield c


def error_of(r) -> dict:
    assert r.headers["content-type"] == "application/json", r.text
    return r.json()["error"]


def npy_header(shape) -> bytes:
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, {"descr": "<f4", "fortran_order": False, "shape": shape})
    return out.getvalue()


def status_counts(client) -> dict:
    counts = {}
    for family in text_string_to_metric_families(client.get("/metrics").text):
        for s in family.samples:
            if s.name == "posenc_http_requests_total":
                key = (s.labels["route"], s.labels["status"])
                counts[key] = counts.get(key, 0) + s.value
    return counts


# --- inputs that gave 500s ------------------------------------------------------------------------
def test_a_5000_digit_row_position_is_a_422_not_a_500(client):
    r = client.get("/v1/tables/sin128/rows/" + "1" * 5000)
    assert r.status_code == 422 and error_of(r)["field"] == "position"
    assert client.get("/v1/tables/sin128/rows/" + "9" * 19).status_code == 404  # beyond int64, in 19 digits: no row
    r = client.get("/v1/tables/sin128/rows/+5")  # was row 5
    assert r.status_code == 422 and error_of(r)["field"] == "position"


def test_a_scalar_relative_position_gets_a_scalar_bucket(client):
    r = client.post("/v1/t5/buckets", json={"relative_position": 3})
    assert r.status_code == 200, r.text
    assert r.json() == {"dtype": "int64", "shape": [], "data": int(posenc.t5_relative_position_bucket(3))}


@pytest.mark.parametrize("relative_position, shape", [([], [0]), ([[]], [1, 0]), ([[], []], [2, 0])])
def test_an_empty_json_relative_position_gets_an_empty_answer(client, relative_position, shape):
    """numpy reads [] as float64: was a 422 "must be integers, got dtype float64" for no value at all."""
    assert posenc.t5_relative_position_bucket(relative_position).shape == tuple(shape)
    r = client.post("/v1/t5/buckets", json={"relative_position": relative_position})
    assert r.status_code == 200 and r.json() == {"dtype": "int64", "shape": shape, "data": relative_position}, r.text
    assert client.post("/v1/t5/buckets", json={"relative_position": [1.5]}).status_code == 422


@pytest.mark.parametrize("shape", [(-2, -4), (-1, 0), (2**32, 2**32, 0, 4), (2**31,) * 3 + (0,)])
def test_hostile_npy_shapes_are_a_400(client, shape):
    r = client.post("/v1/rope/apply", params={"spec": '{"head_dim": 4}'}, content=npy_header(shape),
                    headers={"Content-Type": NPY})
    assert r.status_code == 400 and error_of(r)["field"] == "x"


@pytest.mark.parametrize("scaling, field", [
    ("x", "spec.scaling"), (0.5, "spec.scaling"), (True, "spec.scaling"), ([], "spec.scaling"),
    ({"rope_type": []}, "spec.scaling.rope_type"), ({"rope_type": {}}, "spec.scaling.rope_type"),
    ({"rope_type": "yarn", "factor": 2.0, "beta_fast": 1e308}, "spec.scaling.beta_fast"),
    ({"rope_type": "yarn", "factor": 2.0, "beta_slow": 1e-308}, "spec.scaling.beta_slow"),
])
def test_rope_scaling_values_validation_missed_are_422(client, scaling, field):
    for route, extra in (("/v1/rope/inv_freq", {}), ("/v1/rope/cos_sin", {"positions": [1]})):
        r = client.post(route, json={"spec": {"head_dim": 64, "max_position_embeddings": 4096, "scaling": scaling},
                                     **extra})
        assert r.status_code == 422 and error_of(r)["field"] == field, r.text
    r = client.put("/v1/tables/t", headers={"Authorization": "Bearer secret"},
                   json={"encoding": {"kind": "rope", "head_dim": 64, "max_position_embeddings": 4096,
                                      "scaling": scaling}, "stop": 8})
    assert r.status_code == 422 and error_of(r)["field"] == field.replace("spec.", "encoding."), r.text


@pytest.mark.parametrize("hf_config, field", [
    ({"model_type": [], "head_dim": 64}, "hf_config.model_type"),
    ({"model_type": "gptj", "n_embd": 0, "n_head": 4}, "hf_config.n_embd"),
    ({"model_type": "gptj", "n_embd": 256, "n_head": 4, "rotary_dim": "x"}, "hf_config.rotary_dim"),
    ({"head_dim": 64, "rope_scaling": {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 0}},
     "hf_config.rope_scaling.original_max_position_embeddings"),
    ({"head_dim": 64, "rope_theta": 10000.0}, None),
])
def test_hf_config_errors_name_the_config_key(client, hf_config, field):
    r = client.post("/v1/rope/cos_sin", json={"hf_config": hf_config, "positions": [1]})
    if field is None:
        assert r.status_code == 200
    else:
        assert r.status_code == 422 and error_of(r)["field"] == field, r.text
        assert "config.config" not in r.text and "hf_config.config" not in r.text


def test_an_unhandled_exception_is_a_counted_json_500_with_the_request_id(root, caplog):
    app = create_app(config(root))

    def broken(where: str):
        async def api(scope, receive, send):
            if scope["type"] == "http" and scope["path"] == "/v1/tables":  # a FastAPI route (no fastcompute)
                if where == "after-start":
                    await send({"type": "http.response.start", "status": 200, "headers": []})
                raise RuntimeError("a bug")
            await original(scope, receive, send)
        return api

    original = app.api
    with TestClient(app, raise_server_exceptions=False) as c, caplog.at_level(logging.ERROR, "posenc.http"):
        app.api = broken("before-start")
        r = c.get("/v1/tables", headers={"X-Request-Id": "req-500"})
        assert r.status_code == 500 and error_of(r)["code"] == "internal" and error_of(r)["request_id"] == "req-500"
        assert "a bug" not in r.text and r.headers["x-request-id"] == "req-500"
        app.api = broken("after-start")
        c.get("/v1/tables")
        app.api = original
        assert status_counts(c)[("/v1/tables", "500")] == 2
    assert any("req-500" in record.getMessage() for record in caplog.records)


@pytest.mark.parametrize("where, method, path, body, route", [
    ("raw row route", "GET", "/v1/tables/sin128/rows/3", None, "/v1/tables/{name}/rows/{position}"),
    ("prepared", "POST", "/v1/sinusoidal", {"spec": {"dim": 4}, "positions": [1]}, "/v1/sinusoidal"),
    ("fastcompute", "POST", "/v1/alibi/slopes", {"n_heads": 4}, "/v1/alibi/slopes"),
])
def test_a_bug_on_a_fast_path_is_a_counted_json_500_too(root, monkeypatch, where, method, path, body, route):
    import posenc.http.api.routes.encodings
    import posenc.http.pipeline.fastpath
    import posenc.http.pipeline.prepared

    def bug(*args, **kwargs):
        raise RuntimeError("a bug")

    app = create_app(config(root))
    with TestClient(app, raise_server_exceptions=False) as c:  # started (warmed up) before the bug is planted
        if where == "raw row route":
            monkeypatch.setattr(posenc.http.pipeline.fastpath, "negotiate", bug)  # inside the row plan's answer
        elif where == "prepared":  # the prepared-plan path and the endpoint it hands the request on to
            monkeypatch.setattr(posenc.http.pipeline.prepared.Plan, "rows", bug)
            monkeypatch.setattr(posenc.http.api.routes.encodings, "spec_job", bug)
        else:  # the endpoint called directly, then by FastAPI
            monkeypatch.setattr(posenc.api, "alibi_slopes", bug)
        r = c.request(method, path, json=body, headers={"X-Request-Id": "bug-1"})
        assert r.status_code == 500 and error_of(r) == {
            "code": "internal", "message": "internal error (logged by the server as request bug-1)", "field": None,
            "request_id": "bug-1"}
        assert status_counts(c)[(route, "500")] == 1


# --- loose typing removed -----------------------------------------------------------------------
@pytest.mark.parametrize("route, body, field", [
    ("/v1/sinusoidal", {"spec": {"dim": True}, "positions": [1]}, "spec.dim"),  # was dim 1
    ("/v1/t5/buckets", {"relative_position": [3], "bidirectional": "yes"}, "bidirectional"),  # was true
    ("/v1/alibi/bias", {"n_heads": 2, "q_len": 2, "gamma": False}, "gamma"),  # was 0
    ("/v1/rope/inv_freq", {"spec": {"head_dim": 8, "scaling": []}}, "spec.scaling"),  # was no scaling
    ("/v1/alibi/slopes", {"n_heads": 2, "variant": "mpt", "alibi_bias_max": 0}, "alibi_bias_max"),
    ("/v1/alibi/slopes", {"n_heads": 2.5}, "n_heads"),
    ("/v1/alibi/slopes", {"n_heads": True}, "n_heads"),
])
def test_loose_types_are_refused(client, route, body, field):
    r = client.post(route, json=body)
    assert r.status_code == 422 and error_of(r)["field"] == field, r.text


def test_a_single_row_takes_dtype_once_and_nothing_else_in_its_query(client):
    """Was: `?dtyp=float16` silently ignored (a float32 row), a second dtype silently won."""
    assert client.get("/v1/tables/sin128/rows/1", params={"dtype": "float16"}).json()["dtype"] == "float16"
    for query, field in (("dtyp=float16", "dtyp"), ("%zz", "%zz"), ("dtype=float32&dtype=float16", "dtype")):
        r = client.get(f"/v1/tables/sin128/rows/1?{query}")
        assert r.status_code == 422 and error_of(r)["field"] == field, (query, r.text)


def test_query_values_are_typed_by_their_field_and_given_once(client):
    raw = np.arange(3, dtype="<i8").tobytes()
    ok = client.post("/v1/t5/buckets", params={"bidirectional": "false", "num_buckets": "16"}, content=raw,
                     headers={"Content-Type": RAW})
    assert ok.status_code == 200
    assert ok.json()["data"] == posenc.t5_relative_position_bucket([0, 1, 2], bidirectional=False,
                                                                   num_buckets=16).tolist()
    r = client.post("/v1/t5/buckets", params={"bidirectional": "yes"}, content=raw, headers={"Content-Type": RAW})
    assert r.status_code == 422 and error_of(r)["field"] == "bidirectional"
    r = client.post("/v1/sinusoidal", params={"dtype": "float16"},
                    json={"spec": {"dim": 4}, "positions": [1], "dtype": "float16"})
    assert r.status_code == 422 and error_of(r)["field"] == "dtype"  # in the query and the body


# --- messages -------------------------------------------------------------------------------------
def test_404_names_the_table_once_and_no_server_path(client, root):
    for r in (client.get("/v1/tables/nope"), client.post("/v1/tables/nope/rows", json={"positions": [1]}),
              client.post("/v1/sinusoidal", json={"table": "nope", "positions": [1]})):
        assert r.status_code == 404 and error_of(r)["message"] == "no table named 'nope'", r.text
        assert root not in r.text and "/dev/shm" not in r.text


def test_messages_name_json_types_not_python_ones(client):
    """Was "got NoneType", "got list", "got str": a JSON client never sent those."""
    for body, expected in ((b"null", "got null"), (b"[1]", "got array"), (b'"x"', "got string")):
        r = client.post("/v1/sinusoidal", content=body, headers={"Content-Type": "application/json"})
        assert r.status_code == 400 and error_of(r)["message"] == f"body must be a JSON object, {expected}"
    r = client.post("/v1/models/positions", json={"hf_config": {"head_dim": 8, "rope_scaling": "x"}})
    assert r.status_code == 422 and error_of(r)["field"] == "hf_config.rope_scaling"
    assert error_of(r)["message"].endswith("must be a JSON object, got string"), r.text


def test_seq_len_against_a_table_built_without_one_says_so(client):
    r = client.post("/v1/rope/cos_sin", json={"table": "rope16", "positions": [1], "seq_len": 100})
    assert r.status_code == 422 and "None" not in error_of(r)["message"]
    assert "without a seq_len" in error_of(r)["message"]


def test_table_listings_do_not_expose_writer_pid(client):
    for doc in (client.get("/v1/tables").json()["tables"][0], client.get("/v1/tables/sin128").json(),
                client.get("/info").json()["tables"][0]):
        assert "writer_pid" not in doc and doc["name"]
    assert "writer_pid" not in orjson.dumps(client.get("/openapi.json").json()["components"]).decode()


# --- response size, streaming, gzip, memory budget -------------------------------------------------
def test_the_encoded_json_size_is_capped_not_only_the_array(client):
    positions = list(range(8192))  # 8192 x 128 float32 = 4 MiB array (under the 8 MiB cap), ~17 MiB of JSON
    r = client.post("/v1/sinusoidal", json={"spec": {"dim": 128}, "positions": positions})
    assert r.status_code == 413 and error_of(r)["code"] == "output_too_large" and error_of(r)["field"] == "accept"
    r = client.post("/v1/sinusoidal", json={"spec": {"dim": 128}, "positions": positions}, headers={"Accept": NPY})
    assert r.status_code == 200
    assert np.array_equal(np.load(io.BytesIO(r.content)), posenc.sinusoidal(positions, 128))


def test_large_responses_stream_byte_identical_to_the_whole_document(client):
    positions = list(range(3000))  # 3000 x 128: ~4.3 MB of JSON, well over STREAM_BYTES
    expected = posenc.sinusoidal(positions, 128)
    whole = orjson.dumps({"dtype": "float32", "shape": [3000, 128], "data": expected},
                         option=orjson.OPT_SERIALIZE_NUMPY)
    assert len(whole) > 2 * STREAM_BYTES
    r = client.post("/v1/sinusoidal", json={"spec": {"dim": 128}, "positions": positions})
    assert r.status_code == 200 and "content-length" not in r.headers and r.content == whole
    r = client.post("/v1/sinusoidal", json={"spec": {"dim": 128}, "positions": positions}, headers={"Accept": RAW})
    assert r.content == expected.tobytes()


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4), (1, 7), (4, 1, 1), (0,), (0, 3), (3, 0)])
def test_json_pieces_join_to_the_whole_at_any_piece_size(shape):
    arr = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    whole = orjson.dumps(arr, option=orjson.OPT_SERIALIZE_NUMPY)
    for piece_bytes in (1, 20, 60, 1 << 20):
        assert b"".join(json_pieces(arr, piece_bytes)) == whole, piece_bytes


def test_gzip_when_asked_and_large_enough_only(client):
    small = {"spec": {"dim": 4}, "positions": [1]}
    large = {"spec": {"dim": 64}, "positions": list(range(200))}
    r = client.post("/v1/sinusoidal", json=large, headers={"Accept-Encoding": "identity"})
    plain = r.content
    assert "content-encoding" not in r.headers and len(plain) >= GZIP_MIN_BYTES
    r = client.post("/v1/sinusoidal", json=large, headers={"Accept-Encoding": "gzip"})
    assert r.headers["content-encoding"] == "gzip" and r.headers["vary"] == "accept-encoding"
    assert r.content == plain and int(r.headers["content-length"]) < len(plain) / 2  # httpx decoded it
    for headers in ({"Accept-Encoding": "gzip;q=0"}, {"Accept-Encoding": "gzip", "Accept": NPY}):
        assert "content-encoding" not in client.post("/v1/sinusoidal", json=large, headers=headers).headers
    assert "content-encoding" not in client.post("/v1/sinusoidal", json=small,
                                                 headers={"Accept-Encoding": "gzip"}).headers


def test_whole_json_documents_are_gzipped_when_asked_too(client):
    """Not only arrays: /openapi.json, listings, /info, reports (was: never compressed)."""
    plain = client.get("/openapi.json", headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers and len(plain.content) >= GZIP_MIN_BYTES
    zipped = client.get("/openapi.json", headers={"Accept-Encoding": "gzip"})
    assert zipped.headers["content-encoding"] == "gzip" and zipped.headers["vary"] == "accept-encoding"
    assert zipped.content == plain.content and int(zipped.headers["content-length"]) < len(plain.content) / 3
    small = client.get("/v1/tables/sin128", headers={"Accept-Encoding": "gzip"})
    assert small.status_code == 200 and "content-encoding" not in small.headers
    text = client.get("/metrics", headers={"Accept-Encoding": "gzip"})  # Prometheus text: not JSON
    assert "content-encoding" not in text.headers
    head = client.head("/healthz", headers={"Accept-Encoding": "gzip"})
    assert head.status_code == 200 and "content-encoding" not in head.headers


def test_single_rows_are_gzipped_only_when_wide_and_both_routes_agree(client):
    narrow = client.get("/v1/tables/sin128/rows/3", headers={"Accept-Encoding": "gzip"})  # the raw-ASGI path
    assert narrow.status_code == 200 and "content-encoding" not in narrow.headers
    plain = client.get("/v1/tables/sin1024/rows/3", headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers and len(plain.content) >= GZIP_MIN_BYTES
    zipped = client.get("/v1/tables/sin1024/rows/3", headers={"Accept-Encoding": "gzip"})
    assert zipped.headers["content-encoding"] == "gzip" and zipped.content == plain.content


def test_slow_readers_hold_bounded_memory_and_others_get_503_not_an_oom(tmp_path):
    """A client that never reads a 16 MiB response keeps it charged to the worker's budget (24 MiB):
    a second such request is refused with 503 + Retry-After; once the first client goes, it is served."""
    shm_dir = tempfile.mkdtemp(prefix="posenc-budget-", dir="/dev/shm")
    toml = f"""
[server]
workers = 1
binary_port = 0
shm_dir = "{shm_dir}"
body_timeout_s = 30
[limits]
max_output_bytes = 16777216
max_body_bytes = 2097152
max_buffered_bytes = 25165824
max_positions = 65536
"""
    body = orjson.dumps({"spec": {"dim": 64}, "positions": list(range(65536))})  # 65536 x 64 float32 = 16 MiB
    request = (b"POST /v1/sinusoidal HTTP/1.1\r\nHost: x\r\nAccept: application/octet-stream\r\n"
               b"Content-Type: application/json\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    try:
        with ServerProcess(toml) as server:
            slow = socket.socket()
            slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            slow.connect(("127.0.0.1", server.port))
            slow.sendall(request)
            assert slow.recv(64).startswith(b"HTTP/1.1 200")  # started, then never read again
            refused = httpx.post(f"{server.url}/v1/sinusoidal", content=body, timeout=30,
                                 headers={"Content-Type": "application/json", "Accept": RAW})
            assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
            assert refused.json()["error"]["code"] == "busy"
            assert httpx.get(f"{server.url}/healthz").status_code == 200
            slow.close()
            for _ in range(50):
                served = httpx.post(f"{server.url}/v1/sinusoidal", content=body, timeout=30,
                                    headers={"Content-Type": "application/json", "Accept": RAW})
                if served.status_code == 200:
                    break
                time.sleep(0.1)
            assert served.status_code == 200 and len(served.content) == 16 << 20
    finally:
        shutil.rmtree(shm_dir, ignore_errors=True)


# --- offline docs -----------------------------------------------------------------------------------
def test_docs_load_only_local_assets_that_the_service_serves(client):
    page = client.get("/docs")
    assert page.status_code == 200
    urls = re.findall(r"""(?:src|href|url)\s*[:=]\s*['"]([^'"]+)['"]""", page.text)
    assert urls and not [u for u in urls if "//" in u], urls  # no scheme, no host: nothing from a CDN
    kinds = {".js": "javascript", ".css": "text/css", ".png": "image/png", ".json": "application/json"}
    for url in urls:
        r = client.get(url)
        assert r.status_code == 200, url
        expected = next(kind for suffix, kind in kinds.items() if url.endswith(suffix))
        assert expected in r.headers["content-type"], (url, r.headers["content-type"])
        assert len(r.content) > 1000 or url.endswith(".json"), url


# --- OpenAPI honesty ------------------------------------------------------------------------------
def test_openapi_states_what_the_server_enforces(client):
    schema = client.get("/openapi.json").json()
    paths = schema["paths"]
    name = next(p for p in paths["/v1/tables/{name}"]["get"]["parameters"] if p["name"] == "name")["schema"]
    pattern = re.compile(name["pattern"])
    for good in ("sin128", "a.b", "a-b_c.", ".x", "x" * 64):
        assert pattern.search(good), good
    for bad in (".", "..", "a..b", "a/b", ""):
        assert not pattern.search(bad), bad
    assert client.get("/v1/tables/a..b").status_code == 422  # (a client normalises "." and ".." away)
    slopes = schema["components"]["schemas"]["AlibiSlopesRequest"]["properties"]["alibi_bias_max"]["anyOf"][0]
    assert slopes["exclusiveMinimum"] == 0
    gamma = schema["components"]["schemas"]["AlibiBiasRequest"]["properties"]["gamma"]
    assert "boolean" not in orjson.dumps(gamma).decode()
    assert {"401", "403"} <= set(paths["/v1/tables/{name}"]["put"]["responses"])
    assert "head" in paths["/healthz"] and "head" in paths["/readyz"]
    for operations in paths.values():
        for operation in operations.values():
            assert any(p["name"] == "X-Request-Id" for p in operation["parameters"])
            assert all("X-Request-Id" in response["headers"] for response in operation["responses"].values())
    position = next(p for p in paths["/v1/tables/{name}/rows/{position}"]["get"]["parameters"]
                    if p["name"] == "position")["schema"]
    assert not re.search(position["pattern"], "+5") and not re.search(position["pattern"], "1" * 20)


def test_405_lists_every_method_of_the_path(client):
    r = client.options("/v1/tables/sin128")
    assert r.status_code == 405 and r.headers["allow"] == "DELETE, GET, PUT"
    r = client.delete("/v1/tables")
    assert r.status_code == 405 and r.headers["allow"] == "GET"


# --- serving features -------------------------------------------------------------------------------
def test_request_id_is_echoed_generated_and_validated(client):
    r = client.get("/healthz", headers={"X-Request-Id": "trace-42:a/b"})
    assert r.headers["x-request-id"] == "trace-42:a/b"
    ids = {client.get("/healthz").headers["x-request-id"] for _ in range(3)}
    assert len(ids) == 3 and all(re.fullmatch(r"[0-9a-f]{16}", i) for i in ids)
    fast = client.get("/v1/tables/sin128/rows/3", headers={"X-Request-Id": "row-3"})  # the raw-ASGI path too
    assert fast.status_code == 200 and fast.headers["x-request-id"] == "row-3"
    err = client.get("/v1/tables/nope", headers={"X-Request-Id": "missing"})
    assert error_of(err)["request_id"] == "missing" and err.headers["x-request-id"] == "missing"
    for bad in ("has space", "x" * 129, "é", "a\tb"):
        r = client.get("/healthz", headers={"X-Request-Id": bad.encode("utf-8")})
        assert r.status_code == 422 and error_of(r)["field"] == "x-request-id"


def test_access_log_lines_carry_the_request_id(root, caplog):
    with TestClient(create_app(config(root, {"access_log": True}))) as c, caplog.at_level(logging.INFO, "posenc"):
        c.get("/v1/tables/sin128/rows/2", headers={"X-Request-Id": "fast-row"})
        c.get("/v1/tables/nope", headers={"X-Request-Id": "missing-table"})
    lines = [r.getMessage() for r in caplog.records if r.name == "posenc.access"]
    assert any('"GET /v1/tables/sin128/rows/2" 200' in line and "request_id=fast-row" in line for line in lines)
    assert any('"GET /v1/tables/nope" 404' in line and "request_id=missing-table" in line for line in lines)


def test_head_on_health_routes(client):
    for path in ("/healthz", "/readyz"):
        r = client.head(path)
        assert r.status_code == 200 and r.content == b""


def test_info_states_versions_kernel_limits_and_tables(client):
    info = client.get("/info").json()
    assert info["version"] == posenc.__version__ and info["components"]["numpy"] == np.__version__
    assert info["kernel_path"] == client.get("/healthz").json()["kernel_path"]
    assert info["limits"]["max_output_bytes"] == 8 << 20 and info["limits"]["max_buffered_bytes"] == 1 << 30
    assert {t["name"] for t in info["tables"]} == {"sin128", "rope16", "sin1024"}
    assert info["require_api_key"] is False and info["table_management"] is True


def test_require_api_key_guards_every_route_but_health_and_readiness(root):
    with TestClient(create_app(config(root, {"require_api_key": True})), raise_server_exceptions=False) as c:
        for path in ("/healthz", "/readyz"):
            assert c.get(path).status_code == 200
        for method, path, kwargs in (("GET", "/metrics", {}), ("GET", "/info", {}), ("GET", "/v1/tables", {}),
                                     ("GET", "/v1/tables/sin128/rows/1", {}), ("GET", "/docs", {}),
                                     ("POST", "/v1/alibi/slopes", {"json": {"n_heads": 4}})):
            r = c.request(method, path, **kwargs)
            assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer", path
            r = c.request(method, path, headers={"Authorization": "Bearer wrong"}, **kwargs)
            assert r.status_code == 401, path
            assert c.request(method, path, headers={"Authorization": "Bearer secret"}, **kwargs).status_code == 200
        assert "401" in c.get("/openapi.json", headers={"Authorization": "Bearer secret"}).json()[
            "paths"]["/v1/sinusoidal"]["post"]["responses"]
    with pytest.raises(posenc.PosencError, match="require_api_key"):
        create_app(ServiceConfig.from_dict({"server": {"require_api_key": True}}))


def test_cors_is_off_by_default_and_follows_the_configured_origins(root, client):
    r = client.get("/healthz", headers={"Origin": "https://app.example"})
    assert "access-control-allow-origin" not in r.headers
    app = create_app(config(root, {"cors_origins": ["https://app.example"]}))
    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.get("/v1/tables/sin128/rows/1", headers={"Origin": "https://app.example"})  # the fast path
        assert r.headers["access-control-allow-origin"] == "https://app.example"
        assert status_counts(c)[("/v1/tables/{name}/rows/{position}", "200")] == 1
        assert "x-request-id" in r.headers["access-control-expose-headers"].lower()
        preflight = c.options("/v1/sinusoidal", headers={"Origin": "https://app.example",
                                                         "Access-Control-Request-Method": "POST",
                                                         "Access-Control-Request-Headers": "content-type"})
        assert preflight.status_code == 200 and "POST" in preflight.headers["access-control-allow-methods"]
        other = c.get("/healthz", headers={"Origin": "https://evil.example"})
        assert "access-control-allow-origin" not in other.headers
    with pytest.raises(posenc.PosencError, match="cors_origins"):
        ServiceConfig.from_dict({"server": {"cors_origins": "https://app.example"}})


# --- found repeating the review by hand after the merges ------------------------------------------
def npy(arr: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, arr)
    return out.getvalue()


# --- 500s ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(0, 4), (2, 0, 4), (3, 1, 0, 4)])
def test_an_x_of_no_rows_is_rotated_to_an_empty_answer(client, shape):
    """x.reshape(-1, 0, head_dim) cannot infer the batch: was a ValueError, a 500 over HTTP."""
    x = np.zeros(shape, np.float32)
    assert posenc.rope_apply(x, np.arange(0), {"head_dim": 4}).shape == shape
    for params in ({"spec": '{"head_dim": 4}'}, {"spec": '{"head_dim": 4}', "offset": "3"},
                   {"spec": '{"head_dim": 4, "xpos_scale_base": 512}', "xpos_role": "k"}):
        r = client.post("/v1/rope/apply", params=params, content=npy(x), headers={"Content-Type": NPY,
                                                                                   "Accept": NPY})
        assert r.status_code == 200, r.text
        out = np.load(io.BytesIO(r.content))
        assert out.shape == shape and out.dtype == np.float32


def test_an_empty_q_for_the_rotation_audit_is_a_422(client):
    q = np.zeros((2, 0, 4))
    r = client.post("/v1/audit", files={"q": ("q.npy", npy(q)), "q_rot": ("q_rot.npy", npy(q))})
    assert r.status_code == 422 and error_of(r)["field"] == "q_rot", r.text


@pytest.mark.parametrize("x", [5, "abcd", {"a": 1}])
def test_a_json_x_that_is_no_list_is_a_422(client, x):
    """A scalar or string x was taken for a binary body's array: AttributeError, a 500."""
    r = client.post("/v1/rope/apply", json={"spec": {"head_dim": 4}, "x": x})
    assert r.status_code == 422 and error_of(r)["field"] == "x", r.text


# --- loose typing ---------------------------------------------------------------------------------
@pytest.mark.parametrize("x", [
    [["1", "2", "3", "4"]],  # was rotated as the numbers 1..4
    [["1e3", "nan", "inf", "-inf"]],  # was NaN and inf in, null out
    [[None, 2, 3, 4]],  # was NaN
    [[True, 2, 3, 4]],  # was 1.0
])
def test_a_json_x_holds_numbers_only(client, x):
    r = client.post("/v1/rope/apply", json={"spec": {"head_dim": 4}, "x": x})
    assert r.status_code == 422 and error_of(r)["field"] == "x", r.text


def test_a_json_x_must_fit_its_dtype(client):
    body = {"spec": {"head_dim": 4}, "x": [[1e21, 2, 3, 4]]}
    assert client.post("/v1/rope/apply", json=body).status_code == 200  # float64 holds it
    r = client.post("/v1/rope/apply", json={**body, "dtype": "float16"})  # was inf out (null in JSON)
    assert r.status_code == 422 and error_of(r)["field"] == "x" and "float16" in error_of(r)["message"]


@pytest.mark.parametrize("route, body, field", [
    ("/v1/t5/buckets", {"relative_position": [[1, 2], [3, True]]}, "relative_position"),
    ("/v1/sinusoidal", {"spec": {"dim": 4}, "positions": [0, True]}, "positions"),
    ("/v1/rope/cos_sin", {"spec": {"head_dim": 4}, "positions": [False, 1.5]}, "positions"),
    ("/v1/tables/sin128/rows", {"positions": [1, True]}, "positions"),
    ("/v1/rope/apply", {"spec": {"head_dim": 4}, "x": [[1, 2, 3, 4]], "positions": [True]}, "positions"),
])
def test_a_boolean_among_numbers_is_not_a_number(client, route, body, field):
    """numpy makes [0, true] the integers [0, 1]: that was served as position 1."""
    r = client.post(route, json=body)
    assert r.status_code == 422 and error_of(r)["field"] == field, r.text
    numbers = client.post(route, json={**body, field: [[1, 2], [3, 1]] if field == "relative_position" else [0]})
    assert numbers.status_code == 200, numbers.text


# --- offline docs -----------------------------------------------------------------------------------
def test_docs_page_turns_off_swagger_uis_online_validator(client):
    """Swagger UI's default validatorUrl loads a badge image from validator.swagger.io on any host
    but localhost: an external URL on an offline production host."""
    page = client.get("/docs").text
    assert '"validatorUrl": null' in page


# --- every error is the JSON error body --------------------------------------------------------------
def test_a_refused_cors_preflight_is_a_json_403_and_counted(root):
    app = create_app(config(root, {"cors_origins": ["https://app.example"]}))
    with TestClient(app, raise_server_exceptions=False) as c:
        for headers, field in (({"Origin": "https://evil.example"}, "origin"),
                               ({"Origin": "https://app.example", "Access-Control-Request-Method": "PATCH"},
                                "access-control-request-method"),
                               ({"Origin": "https://app.example", "Access-Control-Request-Headers": "x-evil"},
                                "access-control-request-headers")):
            r = c.options("/v1/sinusoidal", headers={"Access-Control-Request-Method": "POST", **headers,
                                                     "X-Request-Id": "preflight"})
            error = error_of(r)  # was text/plain "Disallowed CORS origin", a 400
            assert r.status_code == 403 and error["code"] == "forbidden" and error["field"] == field, r.text
            assert error["request_id"] == "preflight" and r.headers["x-request-id"] == "preflight"
        ok = c.options("/v1/sinusoidal", headers={"Origin": "https://app.example",
                                                  "Access-Control-Request-Method": "POST"})
        assert ok.status_code == 200 and ok.headers["access-control-allow-origin"] == "https://app.example"
        assert status_counts(c)[("unmatched", "403")] == 3  # no route answers OPTIONS: counted as unmatched


# --- OpenAPI honesty ------------------------------------------------------------------------------
def test_406_is_documented_where_accept_is_negotiated(client):
    paths = client.get("/openapi.json").json()["paths"]
    for method, path, template, body in (
            ("post", "/v1/models/positions", None, {"hf_config": {"head_dim": 8}}),
            ("put", "/v1/tables/t", "/v1/tables/{name}", {"encoding": {"kind": "sinusoidal", "dim": 4}, "stop": 4}),
            ("post", "/explore/figures/audit", None, {"report": {}})):
        r = client.request(method, path, json=body, headers={"Accept": "text/html", "Authorization": "Bearer secret"})
        assert r.status_code == 406, (path, r.text)
        assert "406" in paths[template or path][method]["responses"], path


def test_every_operation_with_a_body_documents_the_body_limits(client):
    """Every body is read under max_body_bytes (413), body_timeout_s (408) and the worker's memory
    budget (503) before any route runs."""
    for path, operations in client.get("/openapi.json").json()["paths"].items():
        for method, operation in operations.items():
            if "requestBody" in operation:
                assert {"408", "413", "503"} <= set(operation["responses"]), (method, path)


def test_info_says_which_lengths_each_table_serves(client):
    tables = {doc["name"]: doc for doc in client.get("/info").json()["tables"]}
    assert tables["sin128"]["serves"].endswith("of any sequence")
