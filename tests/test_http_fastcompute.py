"""The computed routes' fast paths (http.prepared, http.fastcompute) against FastAPI: for the same request, the same
bytes and headers on success (answered without FastAPI), the same error (answered by FastAPI), and
table hits counted once either way. The FastAPI path is forced by calling the FastAPI app directly."""

import asyncio
import io
import urllib.parse

import numpy as np
import orjson
import pytest
from fastapi.testclient import TestClient
from posenc.config import ServiceConfig
from posenc.http import create_app
from posenc.http.pipeline.fastcompute import ROUTES
from posenc.http.pipeline.headers import render
from posenc.http.pipeline.plans import Router, plan_table
from posenc.http.pipeline.prepared import Prepared
from prometheus_client.parser import text_string_to_metric_families
from shm_support import published_config

JSON, NPY, RAW = "application/json", "application/x-npy", "application/octet-stream"
DTYPES = ("float32", "float64", "float16", "bfloat16")
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 256}
ROPE32 = {"head_dim": 32, "base": 500000.0, "scaling": LLAMA3}
TABLES = [{"name": "sin64", "encoding": {"kind": "sinusoidal", "dim": 64}, "start": 0, "stop": 2048},
          {"name": "rope32", "encoding": {"kind": "rope", **ROPE32}, "start": 0, "stop": 2048},
          {"name": "sin16d", "encoding": {"kind": "sinusoidal", "dim": 16}, "start": -100, "stop": 100,
           "dtype": "float64"}]
#: The headers both ways must agree on (uvicorn adds date/server to either alike).
COMPARED = ("content-type", "content-length", "x-posenc-dtype", "x-posenc-shape", "x-posenc-attention-factor")


def _config(root: str) -> ServiceConfig:
    return ServiceConfig.from_dict({
        "server": {"shm_dir": root, "body_timeout_s": 0.5},
        "limits": {"max_positions": 300, "max_body_bytes": 1 << 20, "max_output_bytes": 1 << 20},
        "tables": TABLES})


@pytest.fixture(scope="module")
def app():
    with published_config("posenc-fastcompute-test-", _config) as (config, _):
        app = create_app(config)
        with TestClient(app):  # runs the lifespan: the service (tables, metrics) both ways share
            yield app


class _CountingApi:
    """Stands in for the FastAPI app inside ServiceApp, counting the requests handed to it."""

    def __init__(self, api):
        self.api = api
        self.calls = 0

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            self.calls += 1
        await self.api(scope, receive, send)


@pytest.fixture
def both(app, monkeypatch):
    """(post through the service app, post straight to FastAPI, the counter of requests FastAPI saw)."""
    counting = _CountingApi(app.api)
    monkeypatch.setattr(app, "api", counting)
    service_client, fastapi_client = TestClient(app), TestClient(counting.api)
    return service_client, fastapi_client, counting


def npy(arr) -> bytes:
    out = io.BytesIO()
    np.save(out, arr)
    return out.getvalue()


def _request(client, path, body, accept, query=None):
    kwargs = {"headers": {"Accept": accept}}
    if isinstance(body, tuple):  # (bytes, content type)
        kwargs["content"], kwargs["headers"]["Content-Type"] = body
    else:
        kwargs["json"] = body
    if query:
        path += "?" + urllib.parse.urlencode(query)
    return client.post(path, **kwargs)


def _same(fast, slow) -> None:
    assert fast.status_code == slow.status_code, (fast.text, slow.text)
    if fast.status_code >= 400:  # the service adds the request id to error bodies; bare FastAPI has none
        fast_error, slow_error = fast.json()["error"], slow.json()["error"]
        assert fast_error.pop("request_id") and slow_error.pop("request_id") is None
        assert fast_error == slow_error
        return
    assert fast.content == slow.content
    for header in COMPARED:
        assert fast.headers.get(header) == slow.headers.get(header), header


def _raw(values, dtype="<i8"):
    return np.asarray(values, dtype=dtype).tobytes(), RAW


SPEC_ROUTES = [
    ("/v1/sinusoidal", {"spec": {"dim": 64}, "positions": [0, 7, 2047]}),  # a table hit
    ("/v1/sinusoidal", {"spec": {"dim": 48, "layout": "halves"}, "positions": [3.5, -2, 10**6]}),  # a miss
    ("/v1/sinusoidal", {"table": "sin64", "positions": [5]}),
    ("/v1/sinusoidal", {"spec": {"dim": 16}, "positions": [-100, 99]}),  # the float64 table, start -100
    ("/v1/rope/cos_sin", {"spec": ROPE32, "positions": [1, 2, 3]}),  # hit
    ("/v1/rope/cos_sin", {"spec": {"head_dim": 64, "scaling": {"rope_type": "dynamic", "factor": 2.0},
                                   "max_position_embeddings": 64}, "positions": [0, 100], "seq_len": 128}),
    ("/v1/rope/cos_sin", {"table": "rope32", "positions": [9]}),
    ("/v1/rope/cos_sin", {"spec": {"head_dim": 16, "mrope_section": [2, 3, 3]}, "positions": [[0, 1], [2, 3], [4, 5]]}),
]


@pytest.mark.parametrize("accept", [JSON, NPY, RAW])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("path, body", SPEC_ROUTES)
def test_spec_routes_same_bytes_without_fastapi(both, path, body, dtype, accept):
    service_client, fastapi_client, counting = both
    body = {**body, "dtype": dtype}
    fast = _request(service_client, path, body, accept)
    _same(fast, _request(fastapi_client, path, body, accept))
    # errors: bfloat16 has no .npy type (422); a float32 table cannot answer float64 (409: the table's state)
    wider = "table" in body and dtype == "float64"
    refused = (accept, dtype) == (NPY, "bfloat16") or wider
    assert fast.status_code == (409 if wider else 422 if refused else 200), fast.text
    assert counting.calls == (1 if refused else 0)  # FastAPI gave the error; the rest never reached it


X = np.linspace(-1, 1, 2 * 3 * 32).reshape(2, 3, 32)
OTHER_ROUTES = [
    ("/v1/rope/apply", {"spec": ROPE32, "x": X.tolist(), "positions": [4, 5, 6]}, None),
    ("/v1/rope/apply", {"spec": {"head_dim": 32, "xpos_scale_base": 512}, "x": X[0].tolist(), "offset": 7,
                        "xpos_role": "k", "dtype": "float32"}, None),
    ("/v1/rope/apply", (npy(X.astype(np.float32)), NPY), {"spec": orjson.dumps(ROPE32).decode(),
                                                           "positions": "[1, 2, 3]"}),
    ("/v1/rope/apply", (npy(X.astype(np.float16)), NPY), {"table": "rope32"}),
    ("/v1/rope/inv_freq", {"spec": ROPE32}, None),
    ("/v1/rope/inv_freq", {"table": "rope32", "seq_len": 10}, None),
    ("/v1/alibi/slopes", {"n_heads": 12}, None),
    ("/v1/alibi/slopes", {"n_heads": 8, "variant": "mpt", "alibi_bias_max": 4.0, "dtype": "float16"}, None),
    ("/v1/alibi/bias", {"n_heads": 4, "q_len": 3, "k_len": 5, "mode": "causal"}, None),
    ("/v1/alibi/bias", {"n_heads": 2, "q_len": 2, "mode": "symmetric", "gamma": [0.5, 2.0], "dtype": "float64"}, None),
    ("/v1/t5/buckets", {"relative_position": [[-200, -3], [0, 3]], "bidirectional": False}, None),
    ("/v1/t5/buckets", _raw([-200, -3, 0, 3, 200]), {"num_buckets": "16", "max_distance": "64"}),
    ("/v1/sinusoidal", _raw([1, 2, 3]), {"spec": '{"dim": 64}'}),
    ("/v1/sinusoidal", _raw([1.5, 2.25], "<f8"), {"spec": '{"dim": 10}', "positions_dtype": "float64",
                                                  "dtype": "float64"}),
    ("/v1/sinusoidal", (npy(np.arange(4)), NPY), {"table": "sin64", "dtype": "float16"}),
    ("/v1/rope/cos_sin", _raw(range(64)), {"spec": orjson.dumps(ROPE32).decode()}),
    ("/v1/tables/sin64/rows", {"positions": [0, 1, 2047]}, None),
    ("/v1/tables/sin64/rows", {"positions": [3], "dtype": "bfloat16"}, None),
    ("/v1/tables/sin16d/rows", _raw([-100, 0, 99]), {"dtype": "float64"}),
    ("/v1/tables/sin16d/rows", (npy(np.array([-5, 5])), NPY), None),
]


@pytest.mark.parametrize("accept", [JSON, NPY, RAW])
@pytest.mark.parametrize("path, body, query", OTHER_ROUTES)
def test_every_route_and_body_kind_same_bytes_without_fastapi(both, path, body, query, accept):
    service_client, fastapi_client, counting = both
    fast = _request(service_client, path, body, accept, query)
    _same(fast, _request(fastapi_client, path, body, accept, query))
    bf16_npy = accept == NPY and ((query or {}).get("dtype") == "bfloat16" or
                                  (isinstance(body, dict) and body.get("dtype") == "bfloat16"))
    assert fast.status_code == (422 if bf16_npy else 200), fast.text
    assert counting.calls == (1 if bf16_npy else 0)


def test_every_fast_route_is_exercised():
    exercised = {path for path, _ in SPEC_ROUTES} | {path for path, _, _ in OTHER_ROUTES}
    assert {path.replace("{name}", "sin64") for path in ROUTES} <= exercised | {"/v1/tables/sin64/rows"}


BAD = [
    ("/v1/sinusoidal", {"spec": {"dim": 0}, "positions": [1]}, None, JSON),
    ("/v1/sinusoidal", {"spec": {"dim": 64, "bogus": 1}, "positions": [1]}, None, JSON),
    ("/v1/sinusoidal", {"spec": {"dim": 64}, "positions": [1], "extra": 1}, None, JSON),
    ("/v1/sinusoidal", {"spec": {"dim": 64}, "positions": list(range(301))}, None, RAW),  # max_positions
    ("/v1/sinusoidal", {"spec": {"dim": 4096}, "positions": list(range(300))}, None, RAW),  # max_output_bytes
    ("/v1/sinusoidal", {"spec": {"dim": 64}, "positions": [float(2**54)]}, None, JSON),  # past 2^53
    ("/v1/sinusoidal", {"spec": {"dim": 64}, "positions": [1], "dtype": "int8"}, None, JSON),
    ("/v1/sinusoidal", {"spec": {"dim": 64}, "table": "sin64", "positions": [1]}, None, JSON),
    ("/v1/sinusoidal", {"table": "nope", "positions": [1]}, None, JSON),
    ("/v1/sinusoidal", {"table": "rope32", "positions": [1]}, None, JSON),
    ("/v1/sinusoidal", {"spec": {"dim": 64}, "positions": [1]}, None, "text/html"),  # 406
    ("/v1/sinusoidal", (b"{not json", JSON), None, JSON),
    ("/v1/sinusoidal", (b"abc", RAW), {"spec": '{"dim": 64}'}, JSON),  # not whole int64s
    ("/v1/sinusoidal", (b"x", "text/plain"), None, JSON),  # 415
    ("/v1/sinusoidal", {"spec": {"dim": 64}, "positions": [1], "dtype": "float32"}, {"dtype": "float64"}, JSON),
    ("/v1/rope/cos_sin", {"spec": {"head_dim": 7}, "positions": [1]}, None, JSON),
    ("/v1/rope/cos_sin", {"table": "rope32", "positions": [5000]}, None, JSON),  # outside the table
    ("/v1/rope/cos_sin", {"table": "rope32", "positions": [1], "seq_len": 3}, None, JSON),
    ("/v1/rope/apply", {"spec": ROPE32, "x": [[1.0] * 31]}, None, JSON),
    ("/v1/alibi/slopes", {"n_heads": 0}, None, JSON),
    ("/v1/alibi/bias", {"n_heads": 1000, "q_len": 1000}, None, RAW),  # over max_output_bytes
    ("/v1/t5/buckets", {"relative_position": [1], "num_buckets": 1}, None, JSON),
    ("/v1/tables/sin64/rows", {"positions": [2048]}, None, JSON),
    ("/v1/tables/sin64/rows", {"positions": [1], "dtype": "float64"}, None, JSON),  # wider than the table
    ("/v1/tables/nope/rows", {"positions": [1]}, None, JSON),
    ("/v1/sinusoidal", {"spec": {"dim": 64}, "positions": [True]}, None, JSON),
    ("/v1/sinusoidal", {"spec": {"dim": 64}, "positions": [2**54]}, None, JSON),
    ("/v1/sinusoidal", {"spec": [64], "positions": [1]}, None, JSON),
    ("/v1/sinusoidal", _raw([1]), [("spec", '{"dim": 64}'), ("spec", '{"dim": 64}')], JSON),  # given twice
    ("/v1/rope/cos_sin", _raw([1]), {"spec": '{"head_dim": 32}', "dtype": "float8"}, JSON),
    ("/v1/rope/cos_sin", {"spec": ROPE32, "positions": list(range(301))}, None, JSON),
]


@pytest.mark.parametrize("path, body, query, accept", BAD)
def test_bad_requests_get_fastapis_error(both, path, body, query, accept):
    service_client, fastapi_client, counting = both
    fast = _request(service_client, path, body, accept, query)
    _same(fast, _request(fastapi_client, path, body, accept, query))
    assert 400 <= fast.status_code < 500 and set(fast.json()["error"]) == {"code", "message", "field", "request_id"}
    assert counting.calls == 1  # answered by FastAPI


PLAIN = [("/v1/sinusoidal", {"spec": {"dim": 64}, "positions": [1, 2]}, None, JSON),
         ("/v1/sinusoidal", {"spec": {"dim": 64}, "positions": [5], "dtype": "float16"}, None, NPY),
         ("/v1/sinusoidal", _raw([1, 2, 3]), {"spec": '{"dim": 48}', "dtype": "float64"}, RAW),
         ("/v1/rope/cos_sin", {"spec": ROPE32, "positions": [0, 2047]}, None, RAW),
         ("/v1/rope/cos_sin", _raw([9]), {"spec": orjson.dumps(ROPE32).decode()}, JSON),
         ("/v1/tables/sin64/rows", {"positions": [0, 1, 2047]}, None, RAW),
         ("/v1/tables/sin64/rows", {"positions": [3], "dtype": "float16"}, None, NPY),
         ("/v1/tables/sin16d/rows", _raw([-100, 0, 99]), {"dtype": "float64"}, JSON),
         ("/v1/tables/sin64/rows", _raw(range(0, 2048, 7)), None, RAW)]
NOT_PLAIN = [("/v1/sinusoidal", {"spec": {"dim": 64}, "positions": [1.5]}, None, JSON),  # a float position
             ("/v1/sinusoidal", {"table": "sin64", "positions": [1]}, None, JSON),
             ("/v1/sinusoidal", (npy(np.arange(3)), NPY), {"spec": '{"dim": 64}'}, JSON),
             ("/v1/rope/cos_sin", {"spec": ROPE32, "positions": [1], "seq_len": 100}, None, JSON),
             ("/v1/sinusoidal", _raw([1.5], "<f8"), {"spec": '{"dim": 10}', "positions_dtype": "float64"}, JSON),
             ("/v1/tables/sin16d/rows", (npy(np.array([-5, 5])), NPY), None, JSON),
             ("/v1/tables/sin64/rows", {"positions": 5}, None, JSON),  # a scalar position
             ("/v1/tables/sin64/rows", _raw([1]), {"positions_dtype": "int64"}, RAW)]


@pytest.mark.parametrize("path, body, query, accept, plain", [(*case, True) for case in PLAIN] +
                         [(*case, False) for case in NOT_PLAIN])
def test_plain_spec_requests_are_parsed_by_hand_and_the_rest_by_the_endpoint(both, monkeypatch, path, body, query,
                                                                             accept, plain):
    service_client, fastapi_client, counting = both
    answered = []
    real = Prepared.answer

    def answer(self, *args):
        outcome = real(self, *args)
        answered.append(outcome is not None)  # else the next plan or FastAPI answers
        return outcome

    monkeypatch.setattr(Prepared, "answer", answer)
    _replan(monkeypatch)
    fast = _request(service_client, path, body, accept, query)
    _same(fast, _request(fastapi_client, path, body, accept, query))
    assert fast.status_code == 200 and counting.calls == 0
    assert answered == [plain]


def _metrics(client) -> dict:
    out = {}
    for family in text_string_to_metric_families(client.get("/metrics").text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def test_metrics_count_fast_answers_under_their_route_and_failures_once(both):
    service_client = both[0]
    before = _metrics(service_client)
    assert service_client.post("/v1/sinusoidal", json={"spec": {"dim": 64}, "positions": [1, 2]}).status_code == 200
    assert service_client.post("/v1/tables/sin64/rows", json={"positions": [1]}).status_code == 200
    assert service_client.post("/v1/sinusoidal", json={"spec": {"dim": 8}, "positions": [1]}).status_code == 200
    # a table hit whose encoding then fails (bfloat16 has no .npy type): retried by FastAPI, counted by neither
    assert service_client.post("/v1/sinusoidal", json={"spec": {"dim": 64}, "positions": [1], "dtype": "bfloat16"},
                               headers={"Accept": NPY}).status_code == 422
    after = _metrics(service_client)

    def delta(name, **labels):
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0) - before.get(key, 0)

    assert delta("posenc_table_requests_total", result="hit") == 2
    assert delta("posenc_table_requests_total", result="miss") == 1
    requests = "posenc_http_requests_total"
    assert delta(requests, method="POST", route="/v1/sinusoidal", status="200") == 2
    assert delta(requests, method="POST", route="/v1/sinusoidal", status="422") == 1
    assert delta(requests, method="POST", route="/v1/tables/{name}/rows", status="200") == 1


BUDGETED = [("/v1/sinusoidal", {"spec": {"dim": 64}, "positions": [1, 2, 3]}, None, RAW),
            ("/v1/tables/sin64/rows", {"positions": [1, 2, 3]}, None, RAW),
            ("/v1/tables/sin64/rows", _raw([1, 2, 3]), None, JSON)]


@pytest.mark.parametrize("path, body, query, accept", BUDGETED)
def test_a_response_the_memory_budget_cannot_hold_is_503_both_ways(both, monkeypatch, path, body, query, accept):
    service_client, fastapi_client, counting = both
    budget = service_client.app.service.budget
    monkeypatch.setattr(budget, "limit", budget.cached + 1000)  # the body fits; 3 x 64 values at 8 bytes (1536) do not
    fast, slow = _request(service_client, path, body, accept, query), _request(fastapi_client, path, body, accept,
                                                                               query)
    # the same refusal; the message says how much is held, which through the service includes the request body
    assert fast.status_code == slow.status_code == 503 and fast.headers["retry-after"] == "1"
    assert fast.json()["error"]["code"] == slow.json()["error"]["code"] == "busy" and counting.calls == 1
    monkeypatch.setattr(budget, "limit", budget.cached + (1 << 20))
    assert _request(service_client, path, body, accept, query).status_code == 200 and counting.calls == 1
    assert budget.held == budget.cached  # every reservation given back once the answer was sent


def test_a_fast_answer_holds_its_bytes_in_the_budget_until_sent(app):
    """The reservation covers the array and its body while `send` runs, as the endpoint's does."""
    held = []

    async def send(message):
        if message["type"] == "http.response.body":
            held.append(app.service.budget.held - app.service.budget.cached)

    async def receive():
        return {"type": "http.request", "body": _raw([1, 2, 3])[0], "more_body": False}

    scope = {"type": "http", "method": "POST", "path": "/v1/tables/sin64/rows", "raw_path": b"", "root_path": "",
             "query_string": b"", "headers": [(b"content-type", RAW.encode()), (b"accept", RAW.encode())],
             "scheme": "http", "http_version": "1.1", "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 2)}
    asyncio.run(app(scope, receive, send))
    rows_bytes = 3 * 64 * 4
    assert held == [24 + 2 * rows_bytes]  # the request body, the gathered rows and the body (a view of them)
    assert app.service.budget.held == app.service.budget.cached


def _scope(method, path, query, headers):
    return {"type": "http", "method": method, "path": path, "raw_path": path.encode(), "root_path": "",
            "query_string": query, "headers": headers, "scheme": "http", "http_version": "1.1",
            "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 2)}


@pytest.mark.parametrize("path, body, query, accept", PLAIN + [
    ("/v1/tables/sin64/rows/7", None, None, RAW), ("/v1/tables/sin64/rows/7", None, {"dtype": "float16"}, JSON),
    ("/v1/tables/sin16d/rows/3", None, None, NPY)])
def test_the_protocol_gets_the_same_answer_as_the_asgi_path(app, path, body, query, accept):
    """What posenc's HTTP protocol writes for a request it answers itself (ServiceApp.answer_now)
    is what the ASGI app sends for it: the same status, body and headers but the generated id."""
    method = "GET" if body is None else "POST"
    if body is None:
        content, content_type = b"", None
    elif isinstance(body, tuple):
        content, content_type = body
    else:
        content, content_type = orjson.dumps(body), JSON
    headers = [(b"accept", accept.encode())] + ([(b"content-type", content_type.encode())] if content_type else [])
    encoded_query = urllib.parse.urlencode(query or {}).encode()
    answered = app.answer_now(_scope(method, path, encoded_query, headers), content)
    assert answered is not None
    sent = []

    async def receive():
        return {"type": "http.request", "body": content, "more_body": False}

    async def send(message):
        sent.append(message)

    asyncio.run(app(_scope(method, path, encoded_query, headers), receive, send))
    assert sent[0]["status"] == 200
    strip = lambda pairs: [(k, v) for k, v in pairs if k != b"x-request-id"]
    assert strip(answered.headers) == strip(sent[0]["headers"])
    assert answered.head_lines() == render(answered.headers)  # what the protocol writes
    assert bytes(answered.payload) == b"".join(bytes(m.get("body", b"")) for m in sent[1:])


@pytest.mark.parametrize("path, body, query, accept", NOT_PLAIN + [
    ("/v1/tables/sin64/rows/-1", None, None, RAW), ("/v1/tables/sin64/rows/7", None, {"x": "1"}, RAW),
    ("/healthz", None, None, JSON), ("/v1/alibi/slopes", {"n_heads": 4}, None, JSON)])
def test_the_protocol_leaves_everything_else_to_the_app(app, path, body, query, accept):
    method = "GET" if body is None else "POST"
    content, content_type = (b"", None) if body is None else body if isinstance(body, tuple) else \
        (orjson.dumps(body), JSON)
    headers = [(b"accept", accept.encode())] + ([(b"content-type", content_type.encode())] if content_type else [])
    query = urllib.parse.urlencode(query or {}).encode()
    assert app.answer_now(_scope(method, path, query, headers), content) is None


def _replan(monkeypatch) -> None:
    """The plan table rebuilt, so that it calls the patched Prepared.answer (it holds bound methods)."""
    import gc
    from posenc.http.pipeline.asgi import ServiceApp
    for app in [obj for obj in gc.get_objects() if type(obj) is ServiceApp]:
        monkeypatch.setattr(app, "router", Router(plan_table(app.fast, app.prepared, app.computed, app.service)
                                                  if app.router.plans else []))
