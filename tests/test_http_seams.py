"""Regression tests for issue 24: the faults found where one request could take different ways
through the service (the protocol's own answers, prepared plans, the app): a request run after
its connection closed, two answers to one request, 500s, a plain-text 500 at shutdown, caches
outside the memory budget, responses out of order, redirects built from Host, rejections
without X-Request-Id and closes that reset. The protocol is driven in-process (its bytes in,
what it writes out) unless a real socket is the point."""

import asyncio
import gc
import re
import socket
import threading
import tracemalloc

import numpy as np
import orjson
import pytest
import uvicorn
from fastapi.testclient import TestClient
from posenc import PosencError, SinusoidalSpec, sinusoidal
from posenc.config import ServiceConfig
from posenc.http import create_app
from posenc.http.transport.protocol import LINGER_S, GuardedHttpToolsProtocol
from shm_support import published_config
from uvicorn.server import ServerState

RAW = "application/octet-stream"
TABLES = [{"name": "sin128", "encoding": {"kind": "sinusoidal", "dim": 128}, "stop": 1024},
          {"name": "rope16", "encoding": {"kind": "rope", "head_dim": 16}, "stop": 64}]


def _config(root: str, **limits) -> ServiceConfig:
    return ServiceConfig.from_dict({"server": {"shm_dir": root}, "limits": limits, "tables": TABLES,
                                    "api_key": "secret"})


@pytest.fixture(scope="module")
def served():
    with published_config("posenc-seams-", _config) as (config, store):
        app = create_app(config)
        with TestClient(app, raise_server_exceptions=False) as client:
            yield app, client


@pytest.fixture(scope="module")
def app(served):
    return served[0]


@pytest.fixture(scope="module")
def client(served):
    return served[1]


def error_of(response) -> dict:
    assert response.headers["content-type"] == "application/json", response.text
    return response.json()["error"]


def count_500s(client) -> float:
    text = client.get("/metrics").text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("posenc_http_requests_total{") and 'status="500"' in line)


# --- the protocol, in-process --------------------------------------------------------------------
class _Transport:
    """Records what a protocol writes, and whether it shut its sending side or closed."""

    def __init__(self):
        self.written = bytearray()
        self.eof = False
        self.closed = False

    def write(self, data) -> None:
        assert not self.eof and not self.closed, "a write after the connection's end"
        self.written += data

    def writelines(self, pieces) -> None:
        for piece in pieces:
            self.write(piece)

    def write_eof(self) -> None:
        self.eof = True

    def can_write_eof(self) -> bool:
        return True

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str, default=None):
        return {"peername": ("127.0.0.1", 40000), "sockname": ("127.0.0.1", 8000)}.get(name, default)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def through_protocol(app, *reads: bytes, settle_s: float = 0.3, half_close: bool = False):
    """(transport, server state, protocol) after `reads` were received by posenc's protocol, each
    in one data_received (the last one followed at once by the client's half-close, if asked),
    and the event loop ran what they started."""

    async def main():
        config = uvicorn.Config(app, http=GuardedHttpToolsProtocol, lifespan="off", access_log=False,
                                server_header=False, log_config=None)
        config.load()
        state = ServerState()
        protocol = GuardedHttpToolsProtocol(config=config, server_state=state, app_state={},
                                            _loop=asyncio.get_running_loop())
        transport = _Transport()
        protocol.connection_made(transport)
        for data in reads:
            protocol.data_received(data)
            if half_close and data is reads[-1] and not protocol.eof_received():
                transport.close()  # what asyncio does when eof_received says so
            await asyncio.sleep(0.01)
        deadline = asyncio.get_running_loop().time() + settle_s
        while state.tasks and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.02)
        protocol.connection_lost(None)
        return transport, state, protocol

    return asyncio.run(main())


def statuses(written: bytes) -> list[bytes]:
    return re.findall(rb"HTTP/1\.1 (\d{3}) ", bytes(written))


def test_requests_pipelined_after_a_closing_lane_answer_are_not_run(app, client):
    """Fault 1: an HTTP/1.0 row request (answered in the protocol, then closed) with a PUT and a GET
    in the same write: neither runs (no table created, no 500 counted), as under stock uvicorn."""
    before = count_500s(client)
    put = orjson.dumps({"encoding": {"kind": "sinusoidal", "dim": 8}, "stop": 4})
    data = (b"GET /v1/tables/sin128/rows/3 HTTP/1.0\r\nConnection: keep-alive\r\nAccept: " + RAW.encode() +
            b"\r\n\r\nPUT /v1/tables/ghost HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer secret\r\n"
            b"Content-Type: application/json\r\nContent-Length: " + str(len(put)).encode() + b"\r\n\r\n" + put +
            b"GET /v1/tables/sin128/rows/4 HTTP/1.1\r\nHost: x\r\n\r\n")
    transport, state, _ = through_protocol(app, data)
    assert statuses(transport.written) == [b"200"]
    assert state.total_requests == 1 and not state.tasks
    assert client.get("/v1/tables/ghost/rows/0").status_code == 404
    assert count_500s(client) == before


def test_requests_pipelined_after_a_closing_app_answer_are_not_run(app):
    data = (b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    transport, state, _ = through_protocol(app, data)
    assert statuses(transport.written) == [b"200"]
    assert state.total_requests == 1


def test_a_malformed_request_behind_a_good_one_is_answered_after_it(app):
    """Fault 6: the 400 of a malformed request pipelined behind /healthz comes after /healthz's 200."""
    transport, _, _ = through_protocol(app, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGARBAGE\r\n\r\n")
    assert statuses(transport.written) == [b"200", b"400"]
    first, second = bytes(transport.written).split(b"HTTP/1.1 400")
    assert b'"status":"ok"' in first or b"ok" in first
    assert b'"code":"invalid_body"' in second and transport.eof


def test_a_malformed_request_behind_several_is_answered_after_all_of_them(app):
    good = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    row = b"GET /v1/tables/sin128/rows/5 HTTP/1.1\r\nHost: x\r\nAccept: application/octet-stream\r\n\r\n"
    transport, _, _ = through_protocol(app, good + row + good + b"\x00BAD\r\n\r\n")
    assert statuses(transport.written) == [b"200", b"200", b"200", b"400"]


def test_a_half_close_keeps_the_rejection_behind_the_answers_ahead_of_it(app):
    """Found by tests/test_http_hostile.py: a malformed request behind two good ones, then the
    client's half-close while the second still ran: its answer closed the connection and the 400
    was never sent. The rejection keeps the connection open and closes it after it."""
    spec = orjson.dumps({"spec": {"dim": 32}, "positions": [0]})
    data = (b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
            b"POST /v1/sinusoidal HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
            str(len(spec)).encode() + b"\r\n\r\n" + spec +
            b"POST /v1/sinusoidal HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n")
    transport, _, _ = through_protocol(app, data, half_close=True)
    assert statuses(transport.written) == [b"200", b"200", b"400"]


@pytest.mark.parametrize("data, status, request_id", [
    (b"GARBAGE\r\n\r\n", b"400", None),
    (b"GET / HTTP/1.1\r\nX-Request-Id: mine-1\r\nX-Big: " + b"a" * (70 << 10) + b"\r\n\r\n", b"431", b"mine-1"),
])
def test_rejections_carry_a_request_id(app, data, status, request_id):
    """Fault 7: 400 and 431 (and 408: the same _reject) echo X-Request-Id, in the header and the body."""
    transport, _, _ = through_protocol(app, data)
    head, _, body = bytes(transport.written).partition(b"\r\n\r\n")
    assert statuses(head) == [status]
    given = [line.split(b": ", 1)[1] for line in head.split(b"\r\n") if line.startswith(b"x-request-id: ")]
    assert len(given) == 1 and (request_id is None or given[0] == request_id)
    assert orjson.loads(body)["error"]["request_id"] == given[0].decode()


def test_a_head_timeout_carries_a_request_id(app):
    async def main():
        config = uvicorn.Config(app, http=GuardedHttpToolsProtocol, lifespan="off", log_config=None)
        config.load()
        protocol = GuardedHttpToolsProtocol(config=config, server_state=ServerState(), app_state={},
                                            _loop=asyncio.get_running_loop())
        transport = _Transport()
        protocol.connection_made(transport)
        protocol.data_received(b"GET /healthz HTTP/1.1\r\nHo")
        protocol._head_timed_out()
        protocol.connection_lost(None)
        return transport

    written = bytes(asyncio.run(main()).written)
    assert statuses(written) == [b"408"] and b"\r\nx-request-id: " in written


def test_a_closing_answer_lingers_instead_of_resetting(app):
    """Fault 7: after a `Connection: close` answer the protocol shuts its sending side and reads on
    (dropping what comes) rather than closing with unread bytes, which the kernel answers with a
    reset that destroys the response in flight."""
    transport, _, protocol = through_protocol(
        app, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", b"more bytes the client sent")
    assert statuses(transport.written) == [b"200"]
    assert transport.eof and protocol._lingered == len(b"more bytes the client sent")
    assert LINGER_S > 0


def test_connection_close_answers_survive_a_client_that_keeps_sending():
    """The same over a real socket: every answer arrives although the client sends on after its
    request (2 in 400 were lost to a reset before)."""
    shm = published_config("posenc-seams-linger-", _config)
    with shm as (config, _):
        server = uvicorn.Server(uvicorn.Config(create_app(config), host="127.0.0.1", port=0, log_level="warning",
                                               http=GuardedHttpToolsProtocol, loop="asyncio"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        try:
            while not server.started:
                thread.join(0.05)
            port = server.servers[0].sockets[0].getsockname()[1]
            lost = 0
            for _ in range(60):
                with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" + b"x" * 200_000)
                    got = b""
                    try:
                        while chunk := s.recv(65536):
                            got += chunk
                    except ConnectionResetError:
                        pass
                    lost += not got.startswith(b"HTTP/1.1 200")
            assert lost == 0
        finally:
            server.should_exit = True
            thread.join(10)


# --- one request, one answer ---------------------------------------------------------------------
def test_an_empty_dtype_is_refused_whether_or_not_a_plan_was_built(client):
    """Fault 2: `"dtype": ""` is a 422, before and after a request without dtype built the plan."""
    empty = {"spec": {"dim": 12}, "positions": [1], "dtype": ""}
    first = client.post("/v1/sinusoidal", json=empty)
    assert client.post("/v1/sinusoidal", json={"spec": {"dim": 12}, "positions": [1]}).status_code == 200
    again = client.post("/v1/sinusoidal", json=empty)
    assert first.status_code == again.status_code == 422
    assert error_of(first)["field"] == error_of(again)["field"] == "dtype"
    nulled = client.post("/v1/sinusoidal", json={**empty, "dtype": None})
    assert nulled.status_code == 422 and error_of(nulled)["field"] == "dtype"


# --- no 500s ------------------------------------------------------------------------------------
def test_target_std_without_a_column_is_a_posenc_error():
    """Fault 3: dim 1 with layout t2t has one zero column: target_std cannot scale it (was a
    ZeroDivisionError in the library)."""
    with pytest.raises(PosencError) as raised:
        SinusoidalSpec(1, layout="t2t", target_std=0.02)
    assert raised.value.field == "target_std"
    with pytest.raises(PosencError):
        sinusoidal([0], 1, layout="t2t", target_std=0.02)
    assert sinusoidal([0], 1, layout="t2t").shape == (1, 1)


def test_target_std_without_a_column_is_a_422_on_every_route(client):
    spec = {"dim": 1, "layout": "t2t", "target_std": 0.02}
    r = client.post("/v1/sinusoidal", json={"spec": spec, "positions": [0]})
    assert r.status_code == 422 and error_of(r)["field"] == "spec.target_std"
    r = client.put("/v1/tables/t2t1", json={"encoding": {"kind": "sinusoidal", **spec}, "stop": 4},
                   headers={"authorization": "Bearer secret"})
    assert r.status_code == 422 and error_of(r)["field"].endswith("target_std")


@pytest.mark.parametrize("path, kwargs, shape", [
    ("/v1/tables/sin128/rows", {"json": {"positions": [], "dtype": "float16"}}, [0, 128]),
    ("/v1/tables/sin128/rows?dtype=bfloat16", {"content": b"", "headers": {"content-type": RAW}}, [0, 128]),
    ("/v1/sinusoidal", {"json": {"table": "sin128", "positions": [], "dtype": "float16"}}, [0, 128]),
    ("/v1/rope/cos_sin", {"json": {"table": "rope16", "positions": [], "dtype": "bfloat16"}}, [0, 16]),
    ("/v1/sinusoidal", {"json": {"spec": {"dim": 128}, "positions": [], "dtype": "bfloat16"}}, [0, 128]),
])
def test_no_positions_in_a_16_bit_dtype_is_an_empty_answer(client, path, kwargs, shape):
    """Fault 3: an empty array of 16-bit rows was reshaped with -1 (a 500)."""
    r = client.post(path, **kwargs)
    assert r.status_code == 200, r.text
    assert r.json()["shape"] == shape and r.json()["data"] == []


def test_a_half_sent_body_at_shutdown_gets_a_json_503(app):
    """Fault 4: when the drain limit expires uvicorn cancels the request's task; a body still on its
    way is answered with the service's JSON 503, never uvicorn's plain-text 500."""
    sent = []

    async def main():
        waiting = asyncio.Event()

        async def receive():
            waiting.set()
            await asyncio.Event().wait()  # the rest of the body never comes

        async def send(message):
            sent.append(message)

        scope = {"type": "http", "method": "POST", "path": "/v1/sinusoidal", "raw_path": b"/v1/sinusoidal",
                 "query_string": b"", "root_path": "", "http_version": "1.1", "scheme": "http",
                 "headers": [(b"content-type", b"application/json"), (b"content-length", b"100")],
                 "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 8000), "state": {}}
        task = asyncio.ensure_future(app(scope, receive, send))
        await waiting.wait()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(main())
    start = sent[0]
    headers = dict(start["headers"])
    assert start["status"] == 503 and headers[b"content-type"] == b"application/json"
    assert headers[b"connection"] == b"close" and b"x-request-id" in headers
    assert orjson.loads(sent[1]["body"])["error"]["code"] == "not_ready"


def _row_requests(client, status: str) -> float:
    text = client.get("/metrics").text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith('posenc_http_requests_total{method="GET",route="/v1/tables/{name}/rows/{position}"')
               and f'status="{status}"' in line)


@pytest.mark.parametrize("cancelled_at", ["http.response.start", "http.response.body"])
def test_a_plan_answer_cancelled_while_sent_ends_as_the_general_path_ends_it(app, client, cancelled_at):
    """The ASGI lane sends a `now` plan's answer before the request's recorder exists; a send cancelled
    there (uvicorn's drain limit at shutdown, while the client is not reading) ends as the general
    path ends it: a JSON 503 with X-Request-Id when the head had not gone out, the 503 counted
    either way, nothing raised to uvicorn (whose answer would be a plain-text 500)."""
    sent = []

    async def main():
        cancelled = []

        async def receive():
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message):
            if message["type"] == cancelled_at and not cancelled:
                cancelled.append(message)
                raise asyncio.CancelledError
            sent.append(message)

        scope = {"type": "http", "method": "GET", "path": "/v1/tables/sin128/rows/3",
                 "raw_path": b"/v1/tables/sin128/rows/3", "query_string": b"", "root_path": "",
                 "http_version": "1.1", "scheme": "http", "headers": [(b"accept", RAW.encode()),
                                                                      (b"x-request-id", b"lane-1")],
                 "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 8000), "state": {}}
        await app(scope, receive, send)

    before = _row_requests(client, "503")
    asyncio.run(main())
    assert _row_requests(client, "503") == before + 1
    if cancelled_at == "http.response.start":
        headers = dict(sent[0]["headers"])
        assert sent[0]["status"] == 503 and headers[b"x-request-id"] == b"lane-1"
        assert orjson.loads(sent[1]["body"])["error"]["code"] == "not_ready"
    else:
        assert [m["type"] for m in sent] == ["http.response.start"] and sent[0]["status"] == 200


def test_a_trailing_slash_is_not_redirected_to_the_host_header(client):
    """Fault 7: `GET /v1/tables/` with `Host: evil.example` was a 307 to http://evil.example/v1/tables."""
    r = client.get("/v1/tables/", headers={"host": "evil.example"}, follow_redirects=False)
    assert r.status_code == 404 and "location" not in r.headers
    assert error_of(r)["code"] == "not_found" and r.headers["x-request-id"]


def test_sinusoidal_values_are_unchanged(client):
    r = client.post("/v1/sinusoidal", json={"spec": {"dim": 8}, "positions": [3]},
                    headers={"accept": RAW})
    assert np.array_equal(np.frombuffer(r.content, "<f4").reshape(1, 8), sinusoidal([3], 8))


def test_distinct_wide_specs_hold_bounded_memory_charged_to_the_budget():
    """Fault 5: ~4,000 requests with distinct wide specs grew a worker by 436 MiB with a 128 MiB
    budget (the caches were bounded by count). Now the service's caches hold their bytes from the
    budget (under a third of it) and the library's derived arrays are bounded in bytes too."""
    def wide(root):
        return ServiceConfig.from_dict({"server": {"shm_dir": root}, "tables": [],
                                        "limits": {"max_buffered_bytes": 32 << 20, "max_output_bytes": 8 << 20,
                                                   "max_body_bytes": 8 << 20}})

    with published_config("posenc-seams-wide-", wide) as (config, _):
        app = create_app(config)
        with TestClient(app) as c:
            gc.collect()
            tracemalloc.start()
            try:
                base = tracemalloc.get_traced_memory()[0]
                for i in range(150):
                    for path, spec in (("/v1/sinusoidal", {"dim": 60000 - 2 * i}),
                                       ("/v1/rope/cos_sin", {"head_dim": 60000 - 2 * i})):
                        r = c.post(path, json={"spec": spec, "positions": [1]}, headers={"accept": RAW})
                        assert r.status_code == 200, r.text
                gc.collect()
                grown = tracemalloc.get_traced_memory()[0] - base
            finally:
                tracemalloc.stop()
            budget = app.service.budget
            assert 0 < budget.cached <= budget.limit // 3 and budget.held == budget.cached
            assert grown < budget.limit // 3 + (24 << 20), f"grew {grown / 2**20:.0f} MiB"
