"""A real `posenc serve` (subprocess, 2 workers, real sockets): binary round-trips, metrics summed over
workers, the connection guards uvicorn lacks, and SIGTERM: drain in-flight work, then unlink every table."""

import io
import os
import shutil
import signal
import socket
import sys
import tempfile
import time

import httpx
import numpy as np
import posenc
import pytest
from conftest import assert_matches_oracle
from posenc import reference
from posenc.http.runtime.launch import ServerProcess
from serve_support import served
from posenc.http.runtime.server import Sidecar, Sidecars
from prometheus_client.parser import text_string_to_metric_families

RAW, NPY = "application/octet-stream", "application/x-npy"
KEY = "test-key"


def server_config(shm_dir: str, workers: int = 2) -> str:
    return f"""
[server]
workers = {workers}
binary_port = 0
shm_dir = "{shm_dir}"
drain_timeout_s = 5
keep_alive_s = 2
header_timeout_s = 1
body_timeout_s = 1

[limits]
max_head_bytes = 8192

[[tables]]
name = "sin64"
encoding = {{ kind = "sinusoidal", dim = 64 }}
start = 0
stop = 4096
"""


def segments(shm_dir: str) -> list[str]:
    return sorted(f for f in os.listdir(shm_dir) if f.startswith("posenc."))


@pytest.fixture(scope="module")
def server():
    with served(server_config, env={"POSENC_API_KEY": KEY}, prefix="posenc-serve-test-", clean_exit=True) as process:
        yield process


def npy(arr) -> bytes:
    out = io.BytesIO()
    np.save(out, arr)
    return out.getvalue()


def exchange(server, raw: bytes, wait_s: float = 5.0, half_close: bool = False) -> bytes:
    """Send raw bytes on a fresh connection (then shut down its sending side, with `half_close`);
    everything the server sends until it closes (or wait_s)."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=wait_s) as s:
        s.sendall(raw)
        if half_close:
            s.shutdown(socket.SHUT_WR)
        chunks = []
        try:
            while chunk := s.recv(65536):
                chunks.append(chunk)
        except TimeoutError:
            pass
        return b"".join(chunks)


def test_binary_round_trips(server):
    positions = np.array([0, 17, 4095], dtype="<i8")
    # The module's first requests: a worker may still compile a kernel the warm-up does not cover
    # (the float16 rotation), which on a loaded 2-CPU machine once took over httpx's default 5 s.
    with httpx.Client(base_url=server.url, timeout=30) as c:
        r = c.post("/v1/tables/sin64/rows", content=positions.tobytes(),
                   headers={"Content-Type": RAW, "Accept": RAW})
        assert r.headers["x-posenc-shape"] == "3,64" and r.headers["x-posenc-dtype"] == "float32"
        rows = np.frombuffer(r.content, "<f4").reshape(3, 64)
        assert_matches_oracle(rows, reference.sinusoidal(positions, 64), "float32", angle_max=4096)
        one = c.get("/v1/tables/sin64/rows/17", headers={"Accept": RAW}).content
        assert one == rows[1].tobytes()
        r = c.post("/v1/sinusoidal", content=npy(np.array([0.5, 1e6])), params={"spec": '{"dim": 64}'},
                   headers={"Content-Type": NPY, "Accept": NPY})
        assert_matches_oracle(np.load(io.BytesIO(r.content)), reference.sinusoidal([0.5, 1e6], 64), "float32")
        x = np.random.default_rng(0).standard_normal((3, 4, 8)).astype(np.float16)
        r = c.post("/v1/rope/apply", content=npy(x), params={"spec": '{"head_dim": 8}', "offset": 10},
                   headers={"Content-Type": NPY, "Accept": NPY})
        out = np.load(io.BytesIO(r.content))
        cos, sin = reference.rope_cos_sin(np.arange(10, 14), 1.0 / 10000.0 ** (np.arange(0, 8, 2) / 8))
        assert out.dtype == np.float16
        assert_matches_oracle(out, reference.rope_apply(x.astype(np.float64), cos, sin), "float16", amplitude=8)


def test_a_served_worker_freezes_its_start_up_heap(server):
    """A full collection of the ~100k objects alive after start-up took tens of ms on the event
    loop, every request in flight waiting for it (the P99 of `posenc bench http` was ~90 ms)."""
    with httpx.Client(base_url=server.url) as c:
        assert c.get("/info").json()["gc_frozen_objects"] > 10_000


def _row_requests(client) -> float:
    for family in text_string_to_metric_families(client.get("/metrics").text):
        if family.name == "posenc_http_requests":
            return sum(s.value for s in family.samples
                       if s.labels.get("route") == "/v1/tables/{name}/rows/{position}" and s.labels["status"] == "200")
    return 0.0


def _workers(client) -> set[float]:
    return {s.value for f in text_string_to_metric_families(client.get("/metrics").text)
            if f.name == "posenc_http_workers" for s in f.samples}


def test_metrics_add_up_across_workers(server):
    with httpx.Client(base_url=server.url) as c:
        deadline = time.monotonic() + 30  # /readyz answered by one worker: the other may still be warming up
        while (workers := _workers(c)) != {2} and time.monotonic() < deadline:
            time.sleep(0.2)
        assert workers == {2}
        before = _row_requests(c)
    for i in range(60):  # a new connection each: the kernel spreads them over both workers
        reply = exchange(server, f"GET /v1/tables/sin64/rows/{i} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                         .encode())
        assert reply.startswith(b"HTTP/1.1 200 ")
    with httpx.Client(base_url=server.url) as c:
        assert _row_requests(c) == before + 60


def test_slow_request_head_gets_408(server):
    started = time.monotonic()
    reply = exchange(server, b"GET /v1/tables/sin64/rows/1 HTTP/1.1\r\nHost: x\r\n")  # head never finished
    assert reply.startswith(b"HTTP/1.1 408 ") and b'"request_timeout"' in reply
    assert 0.9 < time.monotonic() - started < 4.0


def test_oversized_head_gets_431(server):
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 10000 + b"\r\n\r\n"
    reply = exchange(server, head)
    assert reply.startswith(b"HTTP/1.1 431 ") and b'"head_too_large"' in reply


def test_malformed_request_gets_a_json_400(server):
    reply = exchange(server, b"GARBAGE\x00\x01 / HTTP/1.1\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 400 ") and b'"error"' in reply


def test_slow_body_gets_408(server):
    head = (b"POST /v1/tables/sin64/rows HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
            b"Content-Length: 80\r\n\r\n")
    reply = exchange(server, head + b"\0" * 8)
    assert reply.startswith(b"HTTP/1.1 408 ") and b'"field":"body"' in reply


def test_sigterm_drains_in_flight_requests_and_unlinks_every_table():
    """One worker (uvicorn in the parent process); the module's server covers stopping several."""
    shm_dir = tempfile.mkdtemp(prefix="posenc-serve-stop-", dir="/dev/shm")
    server = ServerProcess(server_config(shm_dir, workers=1), env={"POSENC_API_KEY": KEY}).start()
    try:
        with httpx.Client(base_url=server.url) as c:
            made = c.put("/v1/tables/made", json={"encoding": {"kind": "sinusoidal", "dim": 8}, "stop": 16},
                         headers={"Authorization": f"Bearer {KEY}"})
            assert made.status_code == 201, made.text
        assert segments(shm_dir) == ["posenc.made.2", "posenc.sin64.1"]
        body = np.array([1, 2], "<i8").tobytes()
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
            s.sendall(b"POST /v1/tables/sin64/rows HTTP/1.1\r\nHost: x\r\nAccept: application/octet-stream\r\n"
                      b"Content-Type: application/octet-stream\r\nContent-Length: 16\r\n\r\n" + body[:8])
            time.sleep(0.2)  # the request is now in flight, waiting for the rest of its body
            server.process.send_signal(signal.SIGTERM)
            time.sleep(0.3)
            s.sendall(body[8:])
            reply = b""
            while b"\r\n\r\n" not in reply or len(reply.split(b"\r\n\r\n", 1)[1]) < 2 * 64 * 4:
                chunk = s.recv(65536)
                assert chunk, reply
                reply += chunk
        assert reply.startswith(b"HTTP/1.1 200 ")
        assert server.process.wait(timeout=15) == 0, server.log()
        assert segments(shm_dir) == []
        assert "removed 1 configured and 1 created tables" in server.log()
        # The registry stays, and the log says why (issue 39: a user saw it left behind).
        assert os.listdir(shm_dir) == ["posenc-registry"]
        assert "the registry (posenc-registry, 128 KiB) stays: it numbers" in server.log()
    finally:
        server.stop()
        shutil.rmtree(shm_dir, ignore_errors=True)


def test_sidecars_are_started_and_stopped(tmp_path):
    """The hook `posenc serve` runs helper processes through (the native binary server's place): SIGTERM
    at shutdown, SIGKILL for one that ignores it past the drain timeout."""
    marker = tmp_path / "ignoring-sigterm"
    stubborn = ("import pathlib, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                f"pathlib.Path({str(marker)!r}).touch(); time.sleep(60)")
    sidecars = Sidecars([Sidecar("polite", (sys.executable, "-c", "import time; time.sleep(60)")),
                         Sidecar("stubborn", (sys.executable, "-c", stubborn))])
    sidecars.start()
    polite, stubborn_process = sidecars.processes
    deadline = time.monotonic() + 10
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert polite.poll() is None and stubborn_process.poll() is None
    sidecars.stop(timeout_s=0.5)
    assert polite.returncode == -signal.SIGTERM and stubborn_process.returncode == -signal.SIGKILL
    assert sidecars.processes == []


def test_client_that_stops_reading_is_disconnected(server):
    """A 64 MiB response to a client that reads nothing: after body_timeout_s (1 s) of no progress the
    server drops the connection instead of holding the buffer forever."""
    request = (b'POST /v1/alibi/bias HTTP/1.1\r\nHost: x\r\nAccept: application/octet-stream\r\n'
               b'Content-Type: application/json\r\nContent-Length: 45\r\n\r\n'
               b'{"n_heads": 16, "q_len": 1024, "k_len": 1024}')
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", server.port))
        s.sendall(request)
        time.sleep(3)
        received = 0
        s.settimeout(10)
        try:
            while chunk := s.recv(1 << 20):
                received += len(chunk)
        except ConnectionResetError:
            pass
    assert received < 16 * 1024 * 1024 * 4
    with httpx.Client(base_url=server.url) as c:
        assert 'posenc_http_rejected_connections_total{reason="write_stall"} 1' in c.get("/metrics").text


def _responses(raw: bytes) -> list[tuple[bytes, bytes]]:
    """(head, body) of each HTTP/1.1 response in a byte stream (Content-Length framed)."""
    out = []
    while raw:
        head, _, rest = raw.partition(b"\r\n\r\n")
        length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        out.append((head, rest[:length]))
        raw = rest[length:]
    return out


def test_every_response_gets_its_head_once_whatever_its_body(server):
    """The guarded protocol holds each response head until its body's first write (one writev):
    a HEAD's head (no body write), 100 Continue (written before the head), keep-alive requests one
    after another, and a streamed body all still come out whole and in order."""
    position = np.array([5], "<i8").tobytes()
    post = (b"POST /v1/tables/sin64/rows HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
            b"Accept: application/octet-stream\r\nContent-Length: 8\r\n\r\n" + position)
    reply = exchange(server, b"HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n" + post +
                     b"GET /v1/tables/sin64/rows/5 HTTP/1.1\r\nHost: x\r\nAccept: application/octet-stream\r\n"
                     b"Connection: close\r\n\r\n", wait_s=3)
    head, *rest = reply.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200 ") and b"content-length" in head.lower()
    (post_head, post_body), (get_head, get_body) = _responses(rest[0])
    assert post_head.startswith(b"HTTP/1.1 200 ") and get_head.startswith(b"HTTP/1.1 200 ")
    assert_matches_oracle(np.frombuffer(post_body, "<f4").reshape(1, 64), reference.sinusoidal([5], 64), "float32")
    expected = get_body
    assert post_body == expected
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(post[:post.index(b"\r\n\r\n")] + b"\r\nExpect: 100-continue\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 100 Continue")  # before the body is sent
        s.sendall(position)
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.partition(b"\r\n\r\n")[2]) < len(expected):
            answer += s.recv(65536)
        assert answer.startswith(b"HTTP/1.1 200 ") and answer.partition(b"\r\n\r\n")[2] == expected
    with httpx.Client(base_url=server.url) as c:  # a body streamed in pieces (over STREAM_BYTES)
        r = c.post("/v1/alibi/bias", json={"n_heads": 4, "q_len": 512, "k_len": 512}, headers={"Accept": RAW})
        assert r.status_code == 200 and len(r.content) == 4 * 512 * 512 * 4


class _Transport:
    """Records what a protocol writes, as calls."""

    def __init__(self):
        self.calls = []

    def write(self, data):
        self.calls.append(("write", bytes(data)))

    def writelines(self, pieces):
        self.calls.append(("writelines", [bytes(p) for p in pieces]))

    def close(self):
        self.calls.append(("close",))


class _Cycle:
    def __init__(self):
        self.transport, self.response_started, self.completed = _Transport(), False, 0

    def on_response(self):
        self.completed += 1

    def finish(self):  # the protocol's lingering close, as the holder calls it
        self.transport.close()


def test_the_head_holder_writes_head_and_body_together():
    from posenc.http.transport.protocol import _HeadHolder

    cycle = _Cycle()
    holder = _HeadHolder(cycle, cycle)
    holder.write(b"HTTP/1.1 100 Continue\r\n\r\n")  # before the response starts: straight through
    cycle.response_started = True
    holder.write(b"HEAD")
    assert cycle.transport.calls == [("write", b"HTTP/1.1 100 Continue\r\n\r\n")]  # the head is held
    holder.write(memoryview(b"body"))
    holder.write(b"more")
    holder.completed()
    assert cycle.transport.calls[1:] == [("writelines", [b"HEAD", b"body"]), ("write", b"more")]
    assert cycle.completed == 1
    for ending in ("completed", "close"):  # no body write (HEAD), or a close: the head still goes out first
        cycle = _Cycle()
        holder = _HeadHolder(cycle, cycle)
        cycle.response_started = True
        holder.write(b"HEAD")
        getattr(holder, ending)()
        assert cycle.transport.calls[0] == ("write", b"HEAD")


def test_requests_answered_in_the_protocol_keep_http_semantics(server):
    """Rows and prepared spec requests are answered in the HTTP protocol itself (no ASGI task):
    pipelined with requests the app answers, they still come back in order; HTTP/1.0 and
    Connection: close close the connection after the answer; the request id is echoed; and every
    answer is counted in the metrics under its route."""
    raw_rows = (b"POST /v1/tables/sin64/rows HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
                b"Accept: application/octet-stream\r\nX-Request-Id: direct-1\r\nContent-Length: 16\r\n\r\n"
                + np.array([1, 2], "<i8").tobytes())
    slopes = (b'POST /v1/alibi/slopes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n'
              b'Content-Length: 13\r\n\r\n{"n_heads":4}')
    spec_body = b'{"spec": {"dim": 64}, "positions": [1, 2]}'
    spec = (b"POST /v1/sinusoidal HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(spec_body), spec_body))
    row = b"GET /v1/tables/sin64/rows/2 HTTP/1.1\r\nHost: x\r\nAccept: application/octet-stream\r\n\r\n"
    with httpx.Client(base_url=server.url) as c:
        before = _row_requests(c)
    reply = exchange(server, raw_rows + slopes + spec + row + b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
                     b"Connection: close\r\n\r\n", wait_s=3)
    answers = _responses(reply)
    assert [head.split(b"\r\n")[0] for head, _ in answers] == [b"HTTP/1.1 200 OK"] * 5
    assert b"x-request-id: direct-1" in answers[0][0] and b"date: " in answers[0][0]
    rows = np.frombuffer(answers[0][1], "<f4").reshape(2, 64)
    assert len(json_of(answers[1][1])["data"]) == 4  # the app's answer, between two protocol answers
    assert np.array_equal(np.asarray(json_of(answers[2][1])["data"], np.float32), rows)
    assert answers[3][1] == rows[1].tobytes() and json_of(answers[4][1])["status"] == "ok"
    assert b"connection: close" in answers[4][0]
    reply = exchange(server, b"GET /v1/tables/sin64/rows/2 HTTP/1.0\r\nAccept: application/octet-stream\r\n\r\n",
                     wait_s=3)  # closed by the server after the answer: exchange returns before wait_s
    (head, body), = _responses(reply)
    assert head.startswith(b"HTTP/1.1 200 ") and b"connection: close" in head and body == rows[1].tobytes()
    with httpx.Client(base_url=server.url) as c:
        assert _row_requests(c) >= before + 2


def _post(path: str, body: bytes, content_type: str = "application/json", accept: str = RAW) -> bytes:
    return (b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\nAccept: %s\r\nContent-Length: %d\r\n\r\n"
            % (path.encode(), content_type.encode(), accept.encode(), len(body)) + body)


def test_requests_the_protocol_cannot_answer_alone_get_the_apps_answer(server):
    """The protocol answers a complete, plain request before uvicorn makes a request cycle for it;
    everything else is handed to the app as uvicorn would have: a body that arrives in two reads,
    a request the prepared plans decline (an invalid spec: the app's 4xx) between two they answer,
    a percent-encoded path (decoded by uvicorn's scope), a body over uvicorn's 64 KiB read
    high-water mark. Each answer is the app's own, in order."""
    spec = b'{"spec": {"dim": 64}, "positions": [3, 1]}'
    expected = posenc.sinusoidal([3, 1], 64).tobytes()  # bit for bit: the library is the service
    request = _post("/v1/sinusoidal", spec)
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(request[:-10])
        time.sleep(0.2)
        s.sendall(request[-10:])
        answer = b""
        while len(answer.partition(b"\r\n\r\n")[2]) < len(expected):
            answer += s.recv(65536)
    assert answer.startswith(b"HTTP/1.1 200 ") and answer.partition(b"\r\n\r\n")[2] == expected
    invalid = _post("/v1/sinusoidal", b'{"spec": {"dim": 0}, "positions": [1]}')
    reply = exchange(server, request + invalid + request + b"GET /v1/tables/sin64/rows/%32 HTTP/1.1\r\nHost: x\r\n"
                     b"Accept: application/octet-stream\r\nConnection: close\r\n\r\n", wait_s=3)
    answers = _responses(reply)
    assert [head.split(b" ")[1] for head, _ in answers] == [b"200", b"422", b"200", b"200"]
    assert answers[0][1] == answers[2][1] == expected
    assert json_of(answers[1][1])["error"]["field"] == "spec.dim"
    assert answers[3][1] == posenc.sinusoidal([2], 64).tobytes()
    started = time.monotonic()  # answered in the lane, then closed at once: not after wait_s
    reply = exchange(server, b"GET /v1/tables/sin64/rows/2 HTTP/1.1\r\nHost: x\r\nAccept: application/octet-stream"
                     b"\r\nConnection: close\r\n\r\n", wait_s=3)
    assert time.monotonic() - started < 2
    (head, body), = _responses(reply)
    assert b"connection: close" in head and body == answers[3][1]
    positions = np.arange(9000, dtype="<i8") % 4096  # a 72,000-byte body
    with httpx.Client(base_url=server.url) as c:
        r = c.post("/v1/tables/sin64/rows", content=positions.tobytes(), headers={"Content-Type": RAW, "Accept": RAW})
    assert r.status_code == 200
    rows = np.frombuffer(r.content, "<f4").reshape(9000, 64)
    assert np.array_equal(rows, posenc.sinusoidal(positions, 64))


def _half_closed(server, raw: bytes) -> tuple[bytes, float]:
    """What the server sends, and how long until it closes, for `raw` then the client's half-close."""
    started = time.monotonic()
    reply = exchange(server, raw, wait_s=10, half_close=True)
    return reply, time.monotonic() - started


def test_a_client_that_half_closes_after_its_requests_gets_every_answer(server):
    """A client may shut down its sending side once its request is out (nc, some HTTP/1.0 clients):
    each request it sent whole is answered, by the protocol or by the app, in order, and then the
    connection closes; a body cut short by the half-close can never complete, so that connection
    closes at once, unanswered (uvicorn's own protocol closes at the half-close, answers lost)."""
    spec = _post("/v1/sinusoidal", b'{"spec": {"dim": 64}, "positions": [3, 1]}')
    invalid = _post("/v1/sinusoidal", b'{"spec": {"dim": 0}, "positions": [1]}')
    health = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    reply, _ = _half_closed(server, invalid)  # the app's 422
    (head, body), = _responses(reply)
    assert head.startswith(b"HTTP/1.1 422 ") and json_of(body)["error"]["field"] == "spec.dim"
    reply, _ = _half_closed(server, invalid + spec + health + spec)  # app, protocol, app, protocol
    answers = _responses(reply)
    assert [head.split(b" ")[1] for head, _ in answers] == [b"422", b"200", b"200", b"200"]
    assert answers[1][1] == answers[3][1] == posenc.sinusoidal([3, 1], 64).tobytes()
    reply, seconds = _half_closed(server, spec[:-5])  # its body never completes
    assert reply == b"" and seconds < 2


def test_an_idle_keep_alive_connection_closes_after_keep_alive_s(server):
    """One keep-alive timer per connection (not one armed and cancelled per request): requests
    answered in the protocol and by the app keep a connection open past keep_alive_s (2 s here)
    while they come; once idle, it is closed about keep_alive_s after its last response."""
    row = b"GET /v1/tables/sin64/rows/7 HTTP/1.1\r\nHost: x\r\nAccept: application/octet-stream\r\n\r\n"
    health = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        for request in [row, health] * 3:  # 3 s of requests 0.5 s apart
            s.sendall(request)
            assert s.recv(65536).startswith(b"HTTP/1.1 200 ")
            time.sleep(0.5)
        started = time.monotonic()
        assert s.recv(65536) == b""  # closed by the server
        idle = time.monotonic() - started
    assert 0.5 <= idle <= 4.0, idle


def json_of(body: bytes):
    import json
    return json.loads(body)
