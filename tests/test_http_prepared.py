"""The prepared-plan path (http.prepared) keeps every rule of the general path: a request it cannot
answer as the general path would goes on to it with nothing lost (its body replayed), and its own
answers echo the request id, respect the API key, the concurrency limit and the memory budget, and
follow the tables as they are replaced. Byte-for-byte equality with FastAPI, route by route, is in
test_http_fastcompute.py; here each rule, with the app driven by hand (ASGI messages)."""

import asyncio

import numpy as np
import orjson
import pytest
from fastapi.testclient import TestClient
from posenc.config import ServiceConfig
from posenc.http import create_app
from posenc.http.pipeline.plans import Router, plan_table
from posenc.http.pipeline.prepared import Prepared
from posenc.tables import TableSpec
from shm_support import published_config

RAW = "application/octet-stream"
SPEC_QUERY = b"spec=%7B%22dim%22%3A64%7D"
SIN64 = {"encoding": {"kind": "sinusoidal", "dim": 64}, "start": 0, "stop": 2048}
TABLES = [{"name": "sin64", **SIN64}]


def _config(root: str, **extra) -> ServiceConfig:
    return ServiceConfig.from_dict({"server": {"shm_dir": root, "body_timeout_s": 2.0, **extra.pop("server", {})},
                                    "limits": {"max_positions": 300, "max_concurrency": 8}, "tables": TABLES,
                                    **extra})


@pytest.fixture(scope="module")
def app():
    with published_config("posenc-prepared-test-", _config) as (config, store):
        app = create_app(config)
        with TestClient(app):  # the lifespan: tables attached, metrics open
            app.store = store
            yield app


@pytest.fixture
def answered(monkeypatch):
    """The outcomes of Prepared.answer (the prepared plans): True where it answered, False where it handed the request on."""
    seen = []
    real = Prepared.answer

    def answer(self, *args):
        outcome = real(self, *args)
        seen.append(outcome is not None)
        return outcome

    monkeypatch.setattr(Prepared, "answer", answer)
    _replan(monkeypatch)
    return seen


def call(app, path="/v1/sinusoidal", query=SPEC_QUERY, body=None, headers=(), chunks=1, late=False):
    """(status, headers, body) of one POST driven through the app's ASGI interface: the body in
    `chunks` messages, and with `late` only after the first receive has had to wait."""
    body = np.array([5, 7], "<i8").tobytes() if body is None else body
    named = {k for k, _ in headers}
    listed = [(k.encode(), v.encode()) for k, v in [("content-type", RAW), ("accept", RAW)] if k not in named]
    listed += [(k.encode(), v.encode()) for k, v in headers]  # in order, repeats kept
    scope = {"type": "http", "method": "POST", "path": path, "raw_path": path.encode(), "root_path": "",
             "query_string": query, "headers": listed, "scheme": "http", "http_version": "1.1",
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 2)}
    step = -(-len(body) // chunks) if body else 1
    pieces = [body[i:i + step] for i in range(0, len(body), step)] or [b""]
    messages = [{"type": "http.request", "body": piece, "more_body": i < len(pieces) - 1}
                for i, piece in enumerate(pieces)]
    out = []

    async def receive():
        if late:
            await asyncio.sleep(0)
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message):
        out.append(message)

    asyncio.run(app(scope, receive, send))
    start = out[0]
    return start["status"], dict(start["headers"]), b"".join(bytes(m.get("body", b"")) for m in out[1:])


def test_a_plain_request_is_answered_with_its_request_id(app, answered):
    status, headers, body = call(app, headers=[("x-request-id", "abc-1")])
    assert status == 200 and headers[b"x-request-id"] == b"abc-1" and answered == [True]
    assert headers[b"x-posenc-shape"] == b"2,64" and len(body) == 2 * 64 * 4
    status, headers, _ = call(app)
    assert status == 200 and len(headers[b"x-request-id"]) == 16  # generated


@pytest.mark.parametrize("chunks, late", [(3, False), (1, True), (2, True)])
def test_a_body_still_arriving_is_read_by_the_pipeline_then_planned(app, answered, chunks, late):
    whole = call(app)
    answered.clear()
    status, _, body = call(app, chunks=chunks, late=late)
    assert (status, body) == (200, whole[2]) and answered == [True]


def test_what_the_general_path_must_decide_is_handed_on(app, answered):
    ok = call(app)[2]
    answered.clear()
    # a repeated header: the general path takes the first one
    status, _, body = call(app, headers=[("accept", RAW), ("accept", "application/json")])
    assert status == 200 and body == ok
    # an invalid request id is the pipeline's 422, before any plan
    status, _, body = call(app, headers=[("x-request-id", "bad id!")])
    assert status == 422 and orjson.loads(body)["error"]["field"] == "x-request-id"
    # a position outside the table is computed, not refused; a position past the limit is the endpoint's 422
    far = call(app, body=np.array([5000], "<i8").tobytes())
    assert far[0] == 200 and len(far[2]) == 64 * 4
    status, _, body = call(app, body=np.array([1 << 54], "<i8").tobytes())  # past 2^53
    assert status == 422 and orjson.loads(body)["error"]["field"] == "positions"
    assert answered == [False, True, False]


def test_the_concurrency_limit_and_the_budget_refuse_as_the_general_path_does(app, answered):
    service = app.service
    service.in_flight = 8  # max_concurrency
    try:
        status, headers, _ = call(app)
    finally:
        service.in_flight = 0
    assert status == 429 and headers[b"retry-after"] == b"1"
    limit = service.budget.limit
    service.budget.limit = service.budget.cached + 100  # the body fits, its answer does not
    try:
        status, _, body = call(app)
    finally:
        service.budget.limit = limit
    assert status == 503 and orjson.loads(body)["error"]["code"] == "busy"
    assert answered == [False] and service.budget.held  # 429 before any plan == service.budget.cached
    assert call(app)[0] == 200 and service.budget.held == service.budget.cached


def test_the_api_key_is_checked_on_this_path_too(answered):
    keyed = lambda root: _config(root, server={"require_api_key": True}, api_key="s3cret")
    with published_config("posenc-prepared-key-", keyed) as (config, _):
        app = create_app(config)
        with TestClient(app):
            assert call(app)[0] == 401
            assert call(app, headers=[("authorization", "Bearer wrong")])[0] == 401
            assert call(app, headers=[("authorization", "Bearer s3cret")])[0] == 200
    assert answered == [True]  # 401 before any plan


def test_plans_follow_a_replaced_table(app, answered):
    positions = np.array([3, 9], "<i8").tobytes()
    before = call(app, path="/v1/tables/sin64/rows", query=b"", body=positions)[2]
    replaced = TableSpec.from_dict({**SIN64, "encoding": {"kind": "sinusoidal", "dim": 64, "base": 500.0}})
    app.store.publish("sin64", replaced)
    tables = app.service.tables
    tables.apply(tables.scan())
    try:
        after = call(app, path="/v1/tables/sin64/rows", query=b"", body=positions)
        assert after[0] == 200 and after[2] != before
        expected = replaced.compute(np.array([3.0, 9.0]), np.dtype(np.float32))
        assert after[2] == expected.astype("<f4").tobytes()
    finally:
        app.store.publish("sin64", TableSpec.from_dict(SIN64))
        tables.apply(tables.scan())
    assert answered == [True, True]


def test_plans_are_bounded_in_bytes_and_held_in_the_budget(app):
    plans, budget = app.prepared._plans, app.service.budget
    for n in range(300):  # as many request shapes as distinct queries, wide ones
        query = b"spec=%7B%22dim%22%3A" + str(4096 + 2 * n).encode() + b"%7D"
        assert call(app, query=query, body=np.array([1], "<i8").tobytes())[0] == 200
    assert 0 < plans.held <= plans.cap and budget.cached >= plans.held


def test_a_plans_output_bound_is_size_bound_for_any_row_count(app):
    """A plan keeps size_bound's two terms (it is linear in the row count) instead of calling it per
    request: the bound that the budget, the output cap and the streaming threshold see is the same."""
    from posenc.http.api.responses import size_bound
    for query in (SPEC_QUERY, SPEC_QUERY + b"&dtype=float16"):
        assert call(app, query=query, body=np.array([1], "<i8").tobytes())[0] == 200
    plans = [value for value, _ in app.prepared._plans._entries.values()]
    assert plans
    for plan in plans:
        for n in (0, 1, 2, 63, 300, 1 << 20):
            assert plan.bound_base + n * plan.bound_per_row == size_bound((n, plan.width), plan.dtype, plan.media)


def _replan(monkeypatch) -> None:
    """The plan table rebuilt, so that it calls the patched Prepared.answer (it holds bound methods)."""
    import gc
    from posenc.http.pipeline.asgi import ServiceApp
    for app in [obj for obj in gc.get_objects() if type(obj) is ServiceApp]:
        monkeypatch.setattr(app, "router", Router(plan_table(app.fast, app.prepared, app.computed, app.service)
                                                  if app.router.plans else []))
