"""A hostile client against a real `posenc serve`: random pipelines of requests of every kind the
service answers differently (protocol lane rows, prepared plans, the app, errors, closes,
HTTP/1.0, malformed heads), sent as one byte stream cut at random points, sometimes half-closed,
sometimes with a random byte mutated. Whatever the script, the answers must be:

* in request order, each request's own answer (a row's bytes are that row's), until the first
  answer that ends the connection; nothing after it;
* never a 5xx (but the 501 of a transfer coding other than chunked), always with an X-Request-Id, JSON errors in the `{error: {code, message, field}}` shape;
* and the server unharmed: /metrics counts no 500 afterwards.

A request with a mutated byte may be answered anything but a 5xx; the script is judged exactly up
to it. Hypothesis draws the scripts, so the ways through the HTTP code are chosen by search, not
by hand."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from posenc import SinusoidalSpec
from http_wire import converse, parse_answers
from serve_support import served
from posenc.tables import TableSpec

ROWS = 256
RAW = b"application/octet-stream"
CONFIG = """
[server]
workers = 1
shm_dir = "{shm_dir}"
keep_alive_s = 5
header_timeout_s = 2
body_timeout_s = 2

[[tables]]
name = "sin32"
encoding = {{ kind = "sinusoidal", dim = 32 }}
start = 0
stop = {rows}
"""


@pytest.fixture(scope="module")
def server():
    with served(lambda shm_dir: CONFIG.format(shm_dir=shm_dir, rows=ROWS), prefix="posenc-hostile-") as process:
        yield process


def _table() -> np.ndarray:
    spec = TableSpec(SinusoidalSpec(32), 0, ROWS)
    rows = np.empty(spec.shape, dtype=np.float32)
    spec.fill(rows)
    return rows


TABLE = _table()


# --- the requests a script is made of, each with the answer it must get ----------------------------
@dataclass(frozen=True)
class Request:
    data: bytes
    status: int
    closes: bool  # the answer ends the connection
    body: bytes | None = None  # the exact body, where it is known
    json_values: np.ndarray | None = None  # the JSON answer's values, where they are known


def row(n: int, raw: bool, http10: bool = False) -> Request:
    accept = RAW if raw else b"application/json"
    version = b"HTTP/1.0" if http10 else b"HTTP/1.1"
    data = b"GET /v1/tables/sin32/rows/%d %s\r\nHost: x\r\nAccept: %s\r\n\r\n" % (n, version, accept)
    if raw:
        return Request(data, 200, http10, body=TABLE[n].tobytes())
    return Request(data, 200, http10, json_values=TABLE[n])


def spec_post(n: int) -> Request:
    body = orjson.dumps({"spec": {"dim": 32}, "positions": [n], "dtype": "float32"})
    data = (b"POST /v1/sinusoidal HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    return Request(data, 200, False, json_values=TABLE[n])


def rows_post(n: int) -> Request:
    body = np.array([n, ROWS - 1 - n], dtype=np.int64).tobytes()
    data = (b"POST /v1/tables/sin32/rows HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
            b"Accept: application/octet-stream\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    return Request(data, 200, False, body=TABLE[[n, ROWS - 1 - n]].tobytes())


def chunked(*pieces: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


FIXED = {
    "health": Request(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 200, False),
    "close": Request(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 200, True),
    "missing table": Request(b"GET /v1/tables/nope/rows/1 HTTP/1.1\r\nHost: x\r\n\r\n", 404, False),
    "row past the end": Request(b"GET /v1/tables/sin32/rows/%d HTTP/1.1\r\nHost: x\r\n\r\n" % ROWS, 404, False),
    "bad spec": Request(b"POST /v1/sinusoidal HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        b"Content-Length: 35\r\n\r\n" + b'{"spec":{"dim":-1},"positions":[0]}', 422, False),
    "bad json": Request(b"POST /v1/sinusoidal HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        b"Content-Length: 5\r\n\r\n{bad}", 400, False),
    "garbage": Request(b"GARBAGE\r\n\r\n", 400, True),
    "unknown route": Request(b"GET /v1/nothing HTTP/1.1\r\nHost: x\r\n\r\n", 404, False),
    "wrong method": Request(b"DELETE /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 405, False),
    "chunked spec": Request(b"POST /v1/sinusoidal HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                            b"Transfer-Encoding: chunked\r\n\r\n" + chunked(b'{"spec":{"dim":32', b'},"positions":[7]}'),
                            200, False, json_values=TABLE[7]),
    "length and chunked": Request(b"POST /v1/sinusoidal HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n"
                                  b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, True),
    "oversized head": Request(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n",
                              431, True),
    "1.0 keep-alive row": Request(b"GET /v1/tables/sin32/rows/3 HTTP/1.0\r\nConnection: keep-alive\r\n"
                                  b"Accept: application/octet-stream\r\n\r\n", 200, True, body=TABLE[3].tobytes()),
    "1.0 keep-alive health": Request(b"GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", 200, True),
    "h2c upgrade": Request(b"POST /v1/sinusoidal HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                           b"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQ\r\n"
                           b"Transfer-Encoding: chunked\r\n\r\n" + chunked(b'{"spec":{"dim":32', b'},"positions":[9]}'),
                           200, False, json_values=TABLE[9]),
    "websocket": Request(b"GET /v1/tables/sin32/rows/1 HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\n"
                         b"Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\r\n", 400, False),
    "content coding": Request(b"POST /v1/tables/sin32/rows HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\n"
                              b"Content-Type: application/octet-stream\r\nContent-Length: 8\r\n\r\n\x01" + bytes(7),
                              415, False),
    "transfer coding": Request(b"POST /v1/sinusoidal HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
                               + chunked(b"{}"), 501, True),
}

positions = st.integers(0, ROWS - 1)
requests = st.one_of(
    st.builds(row, positions, st.booleans()),
    st.builds(row, positions, st.booleans(), st.just(True)),
    st.builds(spec_post, positions),
    st.builds(rows_post, positions),
    st.sampled_from(sorted(FIXED)).map(FIXED.__getitem__),
)


def check_answer(answer: Answer, request: Request, index: int) -> None:
    where = f"answer {index} to {request.data[:60]!r}"
    assert answer.status == request.status, f"{where}: {answer.status} {answer.body[:200]!r}"
    assert answer.headers.get("x-request-id"), f"{where}: no X-Request-Id"
    if request.body is not None:
        assert answer.body == request.body, where
    if request.json_values is not None:
        values = np.asarray(orjson.loads(answer.body)["data"] if answer.body.startswith(b"{")
                            else orjson.loads(answer.body), dtype=np.float32).reshape(-1)
        np.testing.assert_array_equal(values, request.json_values.reshape(-1), err_msg=where)
    if answer.status >= 400:
        error = orjson.loads(answer.body)["error"]
        assert {"code", "message", "field"} <= set(error), f"{where}: {error}"


def mutate(data: bytes, at: int, byte: int, how: str) -> bytes:
    at %= len(data)
    if how == "replace":
        return data[:at] + bytes([byte]) + data[at + 1:]
    if how == "insert":
        return data[:at] + bytes([byte]) + data[at:]
    return data[:at] + data[at + 1:]


def count_500s(port: int) -> float:
    text = converse(port, [(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 0)]).decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("posenc_http_requests_total{") and 'status="5' in line)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(script=st.lists(requests, min_size=1, max_size=8), cuts=st.lists(st.integers(0, 10_000), max_size=6),
       half_close=st.booleans(),
       mutation=st.one_of(st.none(), st.tuples(st.integers(0, 7), st.integers(0, 10_000), st.integers(0, 255),
                                               st.sampled_from(["replace", "insert", "delete"]))))
def test_answers_are_in_order_exact_and_never_5xx(server, script, cuts, half_close, mutation):
    datas = [r.data for r in script]
    mutated_at = None
    if mutation is not None:
        index, at, byte, how = mutation
        mutated_at = index % len(script)
        datas[mutated_at] = mutate(datas[mutated_at], at, byte, how)
        if datas[mutated_at] == script[mutated_at].data:
            mutated_at = None
    if mutated_at is not None:
        half_close = True  # a mutated length may leave the server waiting for a body: end the stream
    elif not half_close:  # else the server waits for more after the last answer: end with a close
        datas.append(FIXED["close"].data)
        script = [*script, FIXED["close"]]
    stream = b"".join(datas)
    points = sorted({c % len(stream) for c in cuts} | {0, len(stream)})
    chunks = [stream[a:b] for a, b in zip(points, points[1:]) if b > a]
    answers = parse_answers(converse(server.port, [(chunk, 0) for chunk in chunks], half_close, timeout_s=10))
    for i, answer in enumerate(answers):  # 501: a transfer coding the server does not decode (RFC 9112 6.1)
        assert answer.status < 500 or answer.status == 501, f"answer {i}: {answer.status} {answer.body[:200]!r}"
        assert answer.headers.get("x-request-id"), f"answer {i} has no X-Request-Id"
    judged = script if mutated_at is None else script[:mutated_at]
    expected = []
    for request in judged:
        expected.append(request)
        if request.closes:
            break
    statuses = [a.status for a in answers]
    if mutated_at is None or (expected and expected[-1].closes):
        assert len(answers) == len(expected), f"{len(answers)} answers to {len(expected)} requests: {statuses}"
    else:  # the mutated request and those after it may be answered, and nothing else is known of them
        assert len(answers) >= len(expected), f"{len(answers)} answers to {len(expected)} requests: {statuses}"
    for i, (answer, request) in enumerate(zip(answers, expected)):
        check_answer(answer, request, i)


def test_the_hostile_scripts_left_no_500_behind(server):
    """Runs after the property test in this module (pytest keeps file order)."""
    assert count_500s(server.port) == 0
