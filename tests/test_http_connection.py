"""The HTTP connection at its edges, against a real `posenc serve` (issue 38).

The state-by-input matrix: the connection is driven into each state it can be in -- idle, idle
after an answer, inside a request head, inside a request body, awaiting the app's answer,
streaming an answer, awaiting earlier answers (queued behind a stream), closing -- and each malformed input is injected there. Whatever the pair, the
answers to the requests received before the malformed one come whole, byte for byte, and in
order; then one JSON rejection with an X-Request-Id that closes the connection (none at all
after a closing answer: nothing more is parsed); and the server counts no 5xx and logs no error.

Then the other edges, each a fault found by a hostile client: upgrades (h2c is ignored, a
WebSocket handshake gets a JSON 400, the body and the next request survive both), body codings
(415 for a content coding, 501 for a transfer coding but chunked), Expect: 100-continue (the
interim 100 only while the body is still to come, whichever way the request is answered), and a
client that pipelines and never reads (the write-stall guard closes it without a 500).
"""

from __future__ import annotations

import re
import socket
import time
from dataclasses import dataclass

import numpy as np
import orjson
import pytest
from posenc import sinusoidal
from http_wire import Answer, converse, parse_answers
from serve_support import served

ROWS = 256
HEADER_TIMEOUT_S = 1
BODY_TIMEOUT_S = 2  # also the write-stall guard's limit
CONFIG = f"""
[server]
workers = 1
binary_port = 0
shm_dir = "{{shm_dir}}"
keep_alive_s = 5
header_timeout_s = {HEADER_TIMEOUT_S}
body_timeout_s = {BODY_TIMEOUT_S}

[[tables]]
name = "sin32"
encoding = {{{{ kind = "sinusoidal", dim = 32 }}}}
stop = {ROWS}
"""


TABLE = sinusoidal(np.arange(ROWS), 32, dtype="float32")  # what the table's rows must be


@pytest.fixture(scope="module")
def server():
    with served(lambda shm_dir: CONFIG.format(shm_dir=shm_dir), prefix="posenc-connection-") as process:
        yield process


# --- talking to it ---------------------------------------------------------------------------------
def json_post(path: str, body: dict, extra: bytes = b"", request_id: bytes | None = None) -> bytes:
    data = orjson.dumps(body)
    rid = b"X-Request-Id: %s\r\n" % request_id if request_id else b""
    return (b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n%s%sContent-Length: %d\r\n\r\n%s"
            % (path.encode(), rid, extra, len(data), data))


def server_errors(server) -> tuple[float, list[str]]:
    """(5xx answers counted in /metrics, error lines in the server's log)."""
    s = converse(server.port, [(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 0)])
    text = parse_answers(s)[0].body.decode()
    five = sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("posenc_http_requests_total{") and re.search(r'status="5\d\d"', line))
    log = [line for line in server.log().splitlines() if "Traceback" in line or "ERROR" in line]
    return five, log


@pytest.fixture
def no_server_error(server):
    """The test fails if the server counted a 5xx or logged an error while it ran."""
    before = server_errors(server)
    yield
    assert server_errors(server) == before


# --- the requests whose answers must survive --------------------------------------------------------
@dataclass(frozen=True)
class Sent:
    name: str
    data: bytes
    status: int = 200
    body: bytes | None = None  # the exact body, where known
    chunked: bool = False  # its answer streams (Transfer-Encoding: chunked)


ROW = Sent("row", b"GET /v1/tables/sin32/rows/5 HTTP/1.1\r\nHost: x\r\nAccept: application/octet-stream\r\n"
           b"X-Request-Id: row\r\n\r\n", body=TABLE[5].tobytes())
HEALTH = Sent("health", b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: health\r\n\r\n")
CLOSE = Sent("close", b"GET /v1/tables/sin32/rows/7 HTTP/1.1\r\nHost: x\r\nAccept: application/octet-stream\r\n"
             b"Connection: close\r\n\r\n", body=TABLE[7].tobytes())


@pytest.fixture(scope="module")
def stream(server) -> Sent:
    """A POST the app answers by streaming ~7 MB of JSON (fractional positions: no prepared plan
    takes them), with the body it answers when it is alone on its connection."""
    data = json_post("/v1/sinusoidal", {"spec": {"dim": 32}, "positions": [i + 0.5 for i in range(20_000)]},
                     request_id=b"stream")
    alone = parse_answers(converse(server.port, [(data + HEALTH.data.replace(b"\r\n\r\n", b"\r\nConnection: close"
                                                                           b"\r\n\r\n"), 0)]))
    assert alone[0].status == 200 and alone[0].headers.get("transfer-encoding") == "chunked", "no streamed answer"
    assert orjson.loads(alone[0].body)["shape"] == [20_000, 32]
    return Sent("stream", data, body=alone[0].body, chunked=True)


# --- the states and the malformed inputs -------------------------------------------------------------
@dataclass(frozen=True)
class State:
    """How to bring a connection into a state: what to send (with pauses) before the malformed
    input, the bytes that begin it (a head or body under way), the earlier requests whose answers
    must come whole, and whether the connection is closing (nothing is answered after)."""

    steps: tuple = ()
    lead: bytes = b""
    before: tuple = ()
    closing: bool = False
    exact: bool = True  # the rejection's status is the input's own (else any rejection status)


CHUNKED_HEAD = (b"POST /v1/sinusoidal HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"X-Request-Id: bad\r\nTransfer-Encoding: chunked\r\n\r\n")


def states(stream: Sent) -> dict[str, State]:
    return {
        "idle": State(),
        "idle after an answer": State(steps=((ROW.data, 0.2),), before=(ROW,)),
        "inside a head": State(steps=((ROW.data + b"GET /healthz HTTP/1.1\r\nHost: x\r\n", 0.1),), before=(ROW,),
                               exact=False),
        "inside a body": State(steps=((ROW.data + CHUNKED_HEAD + b"5\r\n{\"spe\r\n", 0.1),), before=(ROW,),
                               exact=False),
        "awaiting the app's answer": State(lead=HEALTH.data, before=(HEALTH,)),  # in the same read as the input
        "streaming an answer": State(steps=((stream.data, 0.3),), before=(stream,)),
        "awaiting earlier answers": State(steps=((stream.data + ROW.data + HEALTH.data, 0.1),),
                                          before=(stream, ROW, HEALTH)),
        "closing": State(steps=((CLOSE.data, 0.2),), before=(CLOSE,), closing=True),
    }


@dataclass(frozen=True)
class Malformed:
    data: bytes
    status: int
    wait_s: float = 0.0  # how long the input must sit before it is refused (a head that never ends)


MALFORMED = {
    "bad request line": Malformed(b"GET /\x01 HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    "bad header name": Malformed(b"GET /healthz HTTP/1.1\r\nBad\x00Name: x\r\n\r\n", 400),
    "bad chunk size": Malformed(CHUNKED_HEAD + b"zz\r\n", 400),
    "length and chunked": Malformed(b"POST /v1/sinusoidal HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n"
                                    b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    "bad content length": Malformed(b"POST /v1/sinusoidal HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n", 400),
    "oversized head": Malformed(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n", 431),
    "transfer coding": Malformed(b"POST /v1/sinusoidal HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked"
                                 b"\r\n\r\n", 501),
    "head that never ends": Malformed(b"GET /healthz HTTP/1.1\r\nHost: x\r\n", 408, wait_s=HEADER_TIMEOUT_S + 0.5),
}
STATE_NAMES = list(states(Sent("stream", b"")))


def check_earlier(answers: list[Answer], before: tuple, where: str) -> None:
    assert len(answers) >= len(before), f"{where}: {len(answers)} answers for {[s.name for s in before]}"
    for answer, sent in zip(answers, before):
        assert answer.status == sent.status, f"{where}, {sent.name}: {answer.status} {answer.body[:200]!r}"
        if sent.body is not None:
            assert answer.body == sent.body, f"{where}, {sent.name}: its body differs"
        if sent.chunked:
            assert answer.headers.get("transfer-encoding") == "chunked", f"{where}, {sent.name}"


def check_rejection(answer: Answer, status: int | None, where: str) -> None:
    assert answer.status == status if status else answer.status in (400, 408, 431, 501), \
        f"{where}: {answer.status} {answer.body[:200]!r}"
    assert answer.headers.get("content-type") == "application/json", where
    assert answer.headers.get("x-request-id"), f"{where}: no X-Request-Id"
    assert answer.headers.get("connection") == "close", where
    error = orjson.loads(answer.body)["error"]
    assert set(error) == {"code", "message", "field", "request_id"} and error["message"], where


@pytest.mark.parametrize("input_name", list(MALFORMED))
@pytest.mark.parametrize("state_name", STATE_NAMES)
def test_every_state_and_malformed_input_keeps_earlier_answers_whole_and_in_order(
        server, stream, no_server_error, state_name, input_name):
    state, malformed = states(stream)[state_name], MALFORMED[input_name]
    steps = [*state.steps, (state.lead + malformed.data, malformed.wait_s)]
    answers = parse_answers(converse(server.port, steps))
    where = f"{input_name} while {state_name}"
    check_earlier(answers, state.before, where)
    rest = answers[len(state.before):]
    if state.closing:
        assert rest == [], f"{where}: answered after the closing answer: {[a.status for a in rest]}"
        return
    assert len(rest) == 1, f"{where}: {[(a.status, a.body[:80]) for a in rest]}"
    check_rejection(rest[0], malformed.status if state.exact else None, where)


# --- 1: the issue's own reproduction ------------------------------------------------------------------
def test_a_malformed_body_behind_a_pending_request_waits_for_its_answer(server, no_server_error):
    data = (b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: first\r\n\r\n"
            b"POST /v1/sinusoidal HTTP/1.1\r\nHost: x\r\nX-Request-Id: second\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"zz\r\n")
    answers = parse_answers(converse(server.port, [(data, 0)]))
    assert [(a.status, a.headers["x-request-id"]) for a in answers] == [(200, "first"), (400, "second")]


def test_a_half_close_inside_a_body_keeps_the_answers_ahead_of_it(server, stream, no_server_error):
    with socket.create_connection(("127.0.0.1", server.port), timeout=8) as s:
        s.sendall(stream.data + ROW.data + CHUNKED_HEAD + b"5\r\n{\"spe")
        s.shutdown(socket.SHUT_WR)
        got = b""
        while chunk := s.recv(1 << 20):
            got += chunk
    answers = parse_answers(got)
    check_earlier(answers, (stream, ROW), "half-closed inside a body")
    assert len(answers) == 2


# --- 3: a client that pipelines and never reads --------------------------------------------------------
def test_a_client_that_pipelines_and_never_reads_is_closed_without_a_500(server, stream, no_server_error):
    with socket.create_connection(("127.0.0.1", server.port), timeout=8) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall((stream.data + ROW.data) * 8)
        time.sleep(BODY_TIMEOUT_S + 1.5)  # the write-stall guard aborts the connection meanwhile
        got = b""
        try:
            while chunk := s.recv(1 << 20):
                got += chunk
        except ConnectionResetError:
            pass
    assert len(got) < 8 * len(stream.body), "the server wrote everything: no stall happened"


# --- 4, 5: upgrades ------------------------------------------------------------------------------------
def spec_post(n: int, extra: bytes = b"") -> bytes:
    return json_post("/v1/sinusoidal", {"spec": {"dim": 32}, "positions": [n]}, extra)


def values(answer: Answer) -> np.ndarray:
    return np.asarray(orjson.loads(answer.body)["data"], dtype=np.float32)


H2C = b"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n"
WEBSOCKET = (b"Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
             b"Sec-WebSocket-Version: 13\r\n")


@pytest.mark.parametrize("split", ["one read", "body later", "chunked"])
def test_an_h2c_upgrade_is_ignored_and_loses_neither_body_nor_next_request(server, no_server_error, split):
    request = spec_post(9, H2C)
    if split == "chunked":
        head, _, body = request.partition(b"\r\n\r\n")
        head = re.sub(rb"Content-Length: \d+", b"Transfer-Encoding: chunked", head)
        request = head + b"\r\n\r\n" + b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    cut = request.index(b"\r\n\r\n") + 4 if split == "body later" else len(request)
    steps = [(request[:cut], 0.1), (request[cut:] + ROW.data, 0)]
    answers = parse_answers(converse(server.port, steps, timeout_s=3))
    assert [a.status for a in answers] == [200, 200], [a.body[:200] for a in answers]
    np.testing.assert_array_equal(values(answers[0]), TABLE[[9]])
    assert answers[1].body == ROW.body
    assert "upgrade" not in answers[0].headers


def test_an_upgrade_without_a_body_is_ignored_too(server, no_server_error):
    data = b"GET /v1/tables/sin32/rows/5 HTTP/1.1\r\nHost: x\r\nAccept: application/octet-stream\r\n" + H2C + b"\r\n"
    answers = parse_answers(converse(server.port, [(data + HEALTH.data, 0)], timeout_s=3))
    assert [a.status for a in answers] == [200, 200]
    assert answers[0].body == ROW.body


def test_a_websocket_handshake_gets_a_json_400_and_the_connection_goes_on(server, no_server_error):
    answers = parse_answers(converse(server.port, [(spec_post(3, WEBSOCKET) + ROW.data, 0)], timeout_s=3))
    assert [a.status for a in answers] == [400, 200]
    refused = answers[0]
    assert refused.headers["content-type"] == "application/json" and refused.headers["x-request-id"]
    assert orjson.loads(refused.body)["error"]["code"] == "unsupported_upgrade"
    assert orjson.loads(refused.body)["error"]["field"] == "upgrade"
    assert answers[1].body == ROW.body


# --- 6: body codings ---------------------------------------------------------------------------------
RAW_POSITIONS = (b"POST /v1/tables/sin32/rows HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
                 b"Accept: application/octet-stream\r\n")


@pytest.mark.parametrize("coding", [b"br", b"gzip", b"identity, gzip", b"x-unknown"])
def test_a_body_with_a_content_coding_is_a_415(server, no_server_error, coding):
    import gzip
    body = gzip.compress(np.array([1, 2], dtype=np.int64).tobytes())
    data = RAW_POSITIONS + b"Content-Encoding: %s\r\nContent-Length: %d\r\n\r\n%s" % (coding, len(body), body)
    answers = parse_answers(converse(server.port, [(data + ROW.data, 0)], timeout_s=3))
    assert [a.status for a in answers] == [415, 200]
    error = orjson.loads(answers[0].body)["error"]
    assert error["code"] == "unsupported_media_type" and error["field"] == "content-encoding"
    assert answers[0].headers["accept-encoding"] == "identity"


def test_an_identity_content_coding_is_no_coding(server, no_server_error):
    body = np.array([1, 2], dtype=np.int64).tobytes()
    data = RAW_POSITIONS + b"Content-Encoding: identity\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    answers = parse_answers(converse(server.port, [(data, 0)], timeout_s=3))
    assert answers[0].status == 200 and answers[0].body == TABLE[[1, 2]].tobytes()


@pytest.mark.parametrize("coding, status", [(b"gzip, chunked", 501), (b"deflate, chunked", 501), (b"gzip", 501),
                                            (b"chunked, gzip", 400)])  # chunked not last: no body end (RFC 9112 6.3)
def test_a_transfer_coding_but_chunked_is_a_501(server, no_server_error, coding, status):
    data = (b"POST /v1/sinusoidal HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: %s"
            b"\r\n\r\n5\r\nabcde\r\n0\r\n\r\n" % coding)
    answers = parse_answers(converse(server.port, [(HEALTH.data + data + ROW.data, 0)], timeout_s=3))
    assert [a.status for a in answers] == [200, status]  # nothing after it is run
    check_rejection(answers[1], status, coding.decode())
    if status == 501:
        assert orjson.loads(answers[1].body)["error"]["field"] == "transfer-encoding"


# --- 7: Expect: 100-continue ---------------------------------------------------------------------------
EXPECT = b"Expect: 100-continue\r\n"
#: one request a prepared plan answers, one the app does (fractional positions)
EXPECTING = {"plan": json_post("/v1/sinusoidal", {"spec": {"dim": 32}, "positions": [4]}, EXPECT),
             "app": json_post("/v1/sinusoidal", {"spec": {"dim": 32}, "positions": [4.0, 4.5]}, EXPECT)}


@pytest.mark.parametrize("way", list(EXPECTING))
def test_100_continue_is_sent_only_while_the_body_is_still_to_come(server, no_server_error, way):
    request = EXPECTING[way]
    whole = parse_answers(converse(server.port, [(request, 0)], timeout_s=2))
    assert [a.status for a in whole] == [200]
    cut = request.index(b"\r\n\r\n") + 4
    waited = parse_answers(converse(server.port, [(request[:cut], 0.3), (request[cut:], 0)], timeout_s=2))
    assert [a.status for a in waited] == [100, 200]
    assert waited[1].body == whole[0].body
