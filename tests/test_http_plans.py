"""Every plan of the table (pipeline/plans.py) against FastAPI alone, generated from the table.

For each registered plan a list of requests it is registered for, good ones (which the plan must
answer) and error ones (bad dtype, out-of-range positions, wrong content type, missing API key,
...), each sent through the ASGI app twice: once with the plan table, once with the table empty
(FastAPI alone behind the same pipeline rules), and, for the plans the protocol may call, once
through `answer_now`. Status, body bytes and every header but Date/Server must agree (the
request id is sent by the client, so it agrees too). A plan registered without cases here fails
`test_every_plan_has_cases`.
"""

import asyncio
import urllib.parse

import numpy as np
import orjson
import pytest
from fastapi.testclient import TestClient
from posenc.config import ServiceConfig
from posenc.http import create_app
from posenc.http.pipeline.asgi import PLAN
from posenc.http.pipeline.plans import Router
from shm_support import published_config

JSON, NPY, RAW, TEXT = "application/json", "application/x-npy", "application/octet-stream", "text/plain"
ROPE32 = {"head_dim": 32, "base": 10000.0}
TABLES = [{"name": "sin64", "encoding": {"kind": "sinusoidal", "dim": 64}, "start": 0, "stop": 2048},
          {"name": "rope32", "encoding": {"kind": "rope", **ROPE32}, "start": 0, "stop": 2048},
          {"name": "sin16d", "encoding": {"kind": "sinusoidal", "dim": 16}, "start": -100, "stop": 100,
           "dtype": "float64"}]
KEY = "s3cret"
IGNORED = {b"date", b"server"}


def _raw(*positions) -> bytes:
    return np.array(positions, "<i8").tobytes()


def _q(**fields) -> str:
    return urllib.parse.urlencode({k: orjson.dumps(v).decode() if isinstance(v, dict) else v
                                   for k, v in fields.items()})


def case(method, path, *, query="", body=b"", content=None, accept=JSON, key=True, keyed=False, good=False, by=None):
    """One request: `good` ones the plan must answer (`by`: another plan answers it, a valid request
    this plan hands on); `keyed`: sent to the app that requires the API key (`key`: whether the
    request carries it)."""
    if isinstance(body, dict | list):
        body, content = orjson.dumps(body), content or JSON
    return dict(method=method, path=path, query=query, body=body, content=content, accept=accept, key=key,
                keyed=keyed, good=good, by=by)


SIN = {"spec": {"dim": 64}, "positions": [1, 2]}
#: plan name -> the requests it must answer as FastAPI does (good ones answered by it).
CASES = {
    "row": [
        case("GET", "/v1/tables/sin64/rows/7", good=True),
        case("GET", "/v1/tables/sin64/rows/7", accept=RAW, good=True),
        case("GET", "/v1/tables/sin64/rows/2047", accept=NPY, good=True),
        case("GET", "/v1/tables/sin64/rows/7", query="dtype=float16", good=True),
        case("GET", "/v1/tables/sin64/rows/7", query="dtype=bfloat16", accept=RAW, good=True),
        case("GET", "/v1/tables/sin16d/rows/3", accept=NPY, good=True),
        case("GET", "/v1/tables/sin64/rows/7", keyed=True, good=True),
        case("GET", "/v1/tables/sin64/rows/7", keyed=True, key=False),  # missing key
        case("GET", "/v1/tables/sin64/rows/2048"),  # past the table
        case("GET", "/v1/tables/sin64/rows/99999999999999999999999"),
        case("GET", "/v1/tables/sin64/rows/abc"),
        case("GET", "/v1/tables/sin64/rows/7", query="dtype=int8"),  # bad dtype
        case("GET", "/v1/tables/sin64/rows/7", query="dtype=float16&dtype=float32"),
        case("GET", "/v1/tables/sin64/rows/7", query="dtype=bfloat16", accept=NPY),
        case("GET", "/v1/tables/nope/rows/7"),
        case("GET", "/v1/tables/sin64/rows/7", accept="text/html"),
        case("GET", "/v1/tables/sin16d/rows/-5"),  # negative: FastAPI's (a 200)
    ],
    "prepared-spec": [
        case("POST", "/v1/sinusoidal", body=SIN, good=True),
        case("POST", "/v1/sinusoidal", body={**SIN, "dtype": "float16"}, accept=RAW, good=True),
        case("POST", "/v1/sinusoidal", body=_raw(5, 7), content=RAW, accept=NPY, query=_q(spec={"dim": 64}),
             good=True),
        case("POST", "/v1/sinusoidal", body=_raw(5), content=RAW, accept=RAW,
             query=_q(spec={"dim": 64}, dtype="bfloat16"), good=True),
        case("POST", "/v1/rope/cos_sin", body={"spec": ROPE32, "positions": [3, 4]}, good=True),
        case("POST", "/v1/rope/cos_sin", body={"spec": ROPE32, "positions": [3]}, accept=RAW, good=True),
        case("POST", "/v1/sinusoidal", body=SIN, keyed=True, good=True),
        case("POST", "/v1/sinusoidal", body=SIN, keyed=True, key=False),  # missing key
        case("POST", "/v1/sinusoidal", body={**SIN, "dtype": "int8"}),  # bad dtype
        case("POST", "/v1/sinusoidal", body={**SIN, "dtype": ""}),
        case("POST", "/v1/sinusoidal", body={**SIN, "dtype": None}),
        case("POST", "/v1/sinusoidal", body={"spec": {"dim": 64}, "positions": [1 << 54]}),  # out of range
        case("POST", "/v1/sinusoidal", body={"spec": {"dim": 64}, "positions": []}, by="computed"),
        case("POST", "/v1/sinusoidal", body={"spec": {"dim": 64}, "positions": ["x"]}),
        case("POST", "/v1/sinusoidal", body={"spec": {"dim": 63}, "positions": [1]}, good=True),
        case("POST", "/v1/sinusoidal", body={"spec": {"dim": 1, "layout": "t2t", "target_std": 0.02},
                                             "positions": [0]}),
        case("POST", "/v1/sinusoidal", body=orjson.dumps(SIN), content=TEXT),  # wrong content type
        case("POST", "/v1/sinusoidal", body=b"{not json", content=JSON),
        case("POST", "/v1/sinusoidal", body=_raw(5, 7)[:-1], content=RAW, query=_q(spec={"dim": 64})),
        case("POST", "/v1/sinusoidal", body=_raw(5), content=RAW, query=_q(spec={"dim": 64}, dtype="int8")),
        case("POST", "/v1/rope/cos_sin", body={"spec": {"head_dim": 31}, "positions": [3]}),
    ],
    "prepared-rows": [
        case("POST", "/v1/tables/sin64/rows", body={"positions": [1, 5]}, good=True),
        case("POST", "/v1/tables/sin64/rows", body={"positions": [9], "dtype": "float16"}, accept=NPY, good=True),
        case("POST", "/v1/tables/sin64/rows", body=_raw(3, 9), content=RAW, accept=RAW, query="dtype=float16",
             good=True),
        case("POST", "/v1/tables/sin16d/rows", body={"positions": [-100, 99]}, good=True),
        case("POST", "/v1/tables/sin64/rows", body={"positions": [1]}, keyed=True, good=True),
        case("POST", "/v1/tables/sin64/rows", body={"positions": [1]}, keyed=True, key=False),  # missing key
        case("POST", "/v1/tables/sin64/rows", body={"positions": [5000]}),  # out of range
        case("POST", "/v1/tables/sin64/rows", body={"positions": [-1]}),
        case("POST", "/v1/tables/sin64/rows", body={"positions": [1], "dtype": "int8"}),  # bad dtype
        case("POST", "/v1/tables/sin64/rows", body={"positions": [], "dtype": "float16"}, by="computed"),
        case("POST", "/v1/tables/sin64/rows", body=b"", content=RAW, query="dtype=bfloat16", by="computed"),
        case("POST", "/v1/tables/nope/rows", body={"positions": [1]}),
        case("POST", "/v1/tables/sin64/rows", body=orjson.dumps({"positions": [1]}), content=TEXT),
    ],
    "computed": [
        case("POST", "/v1/rope/inv_freq", body={"spec": ROPE32}, good=True),
        case("POST", "/v1/alibi/slopes", body={"n_heads": 12}, good=True),
        case("POST", "/v1/alibi/bias", body={"n_heads": 4, "q_len": 3, "k_len": 5, "mode": "causal"}, good=True),
        case("POST", "/v1/t5/buckets", body={"relative_position": [[-200, -3], [0, 3]], "bidirectional": False},
             good=True),
        case("POST", "/v1/sinusoidal", body={"table": "sin64", "positions": [1]}, good=True),
        case("POST", "/v1/sinusoidal", body={"spec": {"dim": 64}, "positions": [1], "table": "sin64"}),
        case("POST", "/v1/tables/sin64/rows", body={"positions": [1, 2], "extra": 1}),
        case("POST", "/v1/alibi/slopes", body={"n_heads": 12}, keyed=True, good=True),
        case("POST", "/v1/alibi/slopes", body={"n_heads": 12}, keyed=True, key=False),  # missing key
        case("POST", "/v1/alibi/slopes", body={"n_heads": 0}),
        case("POST", "/v1/alibi/slopes", body={"n_heads": 8, "dtype": "int8"}),  # bad dtype
        case("POST", "/v1/rope/inv_freq", body={"spec": {"head_dim": 31}}),
        case("POST", "/v1/t5/buckets", body={"relative_position": [1], "num_buckets": 1}),
        case("POST", "/v1/alibi/bias", body={"n_heads": 1000, "q_len": 1000}, accept=RAW),  # over the output cap
        case("POST", "/v1/alibi/slopes", body=b"n_heads=12", content=TEXT),  # wrong content type
    ],
}
ALL = [(name, i) for name, cases in CASES.items() for i in range(len(cases))]


def _config(root: str, keyed: bool) -> ServiceConfig:
    extra = {"api_key": KEY} if keyed else {}
    return ServiceConfig.from_dict({
        "server": {"shm_dir": root, "body_timeout_s": 0.5, "require_api_key": keyed},
        "limits": {"max_positions": 300, "max_body_bytes": 1 << 20, "max_output_bytes": 1 << 20},
        "tables": TABLES, **extra})


@pytest.fixture(scope="module")
def apps():
    with published_config("posenc-plans-test-", lambda root: _config(root, False)) as (config, _), \
            published_config("posenc-plans-key-", lambda root: _config(root, True)) as (keyed, _):
        plain, with_key = create_app(config), create_app(keyed)
        with TestClient(plain), TestClient(with_key):  # the lifespans: tables attached, metrics open
            yield {False: plain, True: with_key}


def _scope(c) -> dict:
    headers = [(b"accept", c["accept"].encode()), (b"x-request-id", b"plan-test-1")]
    if c["content"]:
        headers.append((b"content-type", c["content"].encode()))
    if c["keyed"] and c["key"]:
        headers.append((b"authorization", f"Bearer {KEY}".encode()))
    return {"type": "http", "method": c["method"], "path": c["path"], "raw_path": c["path"].encode(),
            "root_path": "", "query_string": c["query"].encode(), "headers": headers, "scheme": "http",
            "http_version": "1.1", "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 2)}


def _asgi(app, c):
    """(status, headers without Date/Server, body, the plan that answered or None)."""
    scope = _scope(c)
    messages = [{"type": "http.request", "body": c["body"], "more_body": False}]
    out = []

    async def receive():
        return messages.pop() if messages else {"type": "http.disconnect"}

    async def send(message):
        out.append(message)

    asyncio.run(app(scope, receive, send))
    start = out[0]
    body = b"".join(m.get("body", b"") for m in out[1:])
    return start["status"], _headers(start["headers"]), body, scope.get(PLAN)


def _headers(listed) -> list:
    return sorted((k.lower(), v) for k, v in listed if k.lower() not in IGNORED)


def _parsed(lines: bytes) -> list:
    """(name, value) pairs of a head's header lines (as the protocol writes them)."""
    return [tuple(line.split(b": ", 1)) for line in lines.split(b"\r\n") if line]


def _without_plans(app, monkeypatch) -> None:
    monkeypatch.setattr(app, "router", Router([]))
    monkeypatch.setattr(app, "now", False)


def test_every_plan_has_cases(apps):
    """The table is what is tested: each registered plan has good and error cases, and no case names a
    plan that is not registered."""
    registered = [plan.name for plan in apps[False].router.plans]
    assert len(set(registered)) == len(registered)
    assert sorted(registered) == sorted(CASES)
    for name in registered:
        assert any(c["good"] for c in CASES[name]), name
        assert any(not c["good"] and c["by"] is None for c in CASES[name]), name
        assert any(c["keyed"] and not c["key"] for c in CASES[name]), name  # the missing key


@pytest.mark.parametrize("name, index", ALL, ids=[f"{name}-{i}" for name, i in ALL])
def test_plan_answers_as_fastapi_does(apps, monkeypatch, name, index):
    c = CASES[name][index]
    app = apps[c["keyed"]]
    plan = next(plan for plan in app.router.plans if plan.name == name)
    assert app.router.lookup(c["method"], c["path"]) and plan in app.router.lookup(c["method"], c["path"]) \
        or not c["good"], "a good case the plan is not registered for"
    status, headers, body, answered_by = _asgi(app, c)
    now = app.answer_now(_scope(c), c["body"]) if plan.now else None
    with monkeypatch.context() as patched:
        _without_plans(app, patched)
        reference = _asgi(app, c)
    assert reference[3] is None
    assert (status, headers, body) == reference[:3]
    if c["good"]:
        assert status == 200 and answered_by == name
        if plan.now:
            assert now is not None
    else:
        assert answered_by == c["by"]
    if now is not None:  # what the protocol writes: the same bytes and headers
        assert (200, _headers(_parsed(now.head_lines())), bytes(now.payload)) == reference[:3]


def test_header_keyed_caches_keep_only_short_values():
    """negotiate / accepts_gzip / the content type's media are cached for short header values only:
    a client sending 64 KiB Accept headers, each different, grows no cache (docs/deploy.md)."""
    from posenc.http.api import codecs, responses
    from posenc.http.pipeline import prepared
    caches = (codecs.negotiate.__self__, responses.accepts_gzip.__self__, prepared._media_of.__self__)
    before = tuple(len(cache) for cache in caches)
    for i in range(300):
        filler = "x" * 1000 + str(i)
        assert codecs.negotiate(f"application/json;{filler}=1") == JSON
        assert responses.accepts_gzip(f"gzip;{filler}=1") is True
        assert prepared._media_of(f"application/json;{filler}=1".encode()) == JSON
    after = tuple(len(cache) for cache in caches)
    assert after == before
