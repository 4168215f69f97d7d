"""`posenc bench http --in-process`: each HTTP bench case driven through the ASGI app in a loop, no sockets.

wrk on this shared 2-CPU machine swings by tens of percent between runs; CPU time of the app
alone, called in a loop, is steady to a few percent, so this is the tool for finding and
checking per-request costs. It measures the same app object `posenc serve` runs
(`create_app` with the bench's service config: request id, limits, metrics, budget, the fast
paths, FastAPI), with the same requests as the wrk cases (headers, bodies), handed a
receive that returns the whole body in one message (what uvicorn does for a small body) and a
send that only notes the status and body size. The bare ASGI app (`bench.http.bare_app`,
answering the bytes posenc answered) is driven the same way. Per case: the best CPU time per
request (`time.process_time`) over `--rounds` rounds of `--requests` requests, the cases and
both apps interleaved within each round. Every response is checked: status 200 and posenc's
body size, and the first answer of each case is kept as the bare app's payload.

Called as ASGI apps, both leave out the HTTP server's own work per request (parsing, the
request cycle, the transport), which over the wire is most of a small request. So each app is
also driven through the protocol it runs under: the bare app through uvicorn's httptools
protocol, posenc through its own (protocol.py, which answers the prepared requests itself),
each fed the case's request bytes (head and body, as wrk sends them) on a transport that only
counts what is written; a request is done when the protocol has counted its response complete
(an ASGI task run by the event loop, for the bare app). What this still leaves out is the
kernel: the socket reads and writes, ~10-15 us of a small request here.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from ..config import ServiceConfig
from ..http.app import create_app
from ..http.transport.protocol import GuardedHttpToolsProtocol
from ..shm import TableStore
from . import http_cases as wire
from .timing import machine_line, markdown_table

#: (server name, protocol class) of the runs through an HTTP protocol, after the ASGI-only runs.
PROTOCOLS = {"bare ASGI": ("bare ASGI, uvicorn's protocol", HttpToolsProtocol),
             "posenc": ("posenc, its protocol", GuardedHttpToolsProtocol)}


class _Send:
    """A send that notes the status and counts body bytes, nothing else."""

    __slots__ = ("nbytes", "status")

    def __init__(self):
        self.status = None
        self.nbytes = 0

    async def __call__(self, message):
        if message["type"] == "http.response.start":
            self.status = message["status"]
        else:
            self.nbytes += len(message.get("body", b""))


def _scope(name: str, case: wire.Case) -> dict:
    path, _, query = case.path.partition("?")
    headers = [(b"host", b"127.0.0.1:8000"), (b"user-agent", b"wrk")]
    headers += [(k.lower().encode("latin-1"), v.encode("latin-1"))
                for k, v in wire.request_headers(name, case).items()]
    if case.method == "POST":
        headers.append((b"content-length", str(len(case.body)).encode("ascii")))
    return {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
            "server": ("127.0.0.1", 8000), "client": ("127.0.0.1", 40000), "scheme": "http",
            "method": case.method, "root_path": "", "path": path, "raw_path": path.encode("ascii"),
            "query_string": query.encode("ascii"), "headers": headers, "state": {}}


async def _lifespan(app):
    """Start `app`'s lifespan (the service), returning a coroutine function that shuts it down."""
    inbox: asyncio.Queue = asyncio.Queue()
    outbox: asyncio.Queue = asyncio.Queue()
    task = asyncio.ensure_future(app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}},
                                     inbox.get, outbox.put))
    await inbox.put({"type": "lifespan.startup"})
    started = await outbox.get()
    if started["type"] != "lifespan.startup.complete":
        raise RuntimeError(f"the app did not start: {started}")

    async def stop():
        await inbox.put({"type": "lifespan.shutdown"})
        await outbox.get()
        await task

    return stop


async def _drive(app, scope: dict, body: bytes, n: int) -> tuple[float, _Send]:
    """CPU seconds per request for `n` requests of `scope` (a fresh copy each: apps write to it)."""
    message = {"type": "http.request", "body": body, "more_body": False}

    async def receive():
        return message

    send = _Send()
    statuses_ok = True
    started = time.process_time()
    for _ in range(n):
        send.status = None
        await app(dict(scope), receive, send)
        statuses_ok &= send.status == 200
    seconds = (time.process_time() - started) / n
    if not statuses_ok:
        raise RuntimeError(f"{scope['method']} {scope['path']}: a response was not 200 (last {send.status})")
    return seconds, send


async def _measure(app, cases: list[str], rounds: int, requests: int) -> Measured:
    scopes = {name: _scope(name, wire.CASES[name]) for name in cases}
    for name in wire.CASES:  # the bare app's payloads: what posenc answers each case with
        case = wire.CASES[name]
        captured: list = []

        async def capturing(message, captured=captured):
            captured.append(message)

        await app(dict(_scope(name, case)), _body_once(case.body), capturing)
        start = captured[0]
        kept = [(k, v) for k, v in start["headers"] if k in (b"content-type", b"x-posenc-dtype", b"x-posenc-shape")]
        body = b"".join(m.get("body", b"") for m in captured[1:])
        if start["status"] != 200:
            raise RuntimeError(f"case {name}: posenc answered {start['status']}: {body[:200]!r}")
        wire.PAYLOADS[name.encode()] = (body, kept)
    best: dict[tuple[str, str], float] = {}
    taskless: set[tuple[str, str]] = set()
    for _ in range(rounds):
        for name in cases:
            for server, target in (("bare ASGI", wire.bare_app), ("posenc", app)):
                seconds, send = await _drive(target, scopes[name], wire.CASES[name].body, requests)
                if send.nbytes // requests != len(wire.PAYLOADS[name.encode()][0]):
                    raise RuntimeError(f"case {name}: {server} answered {send.nbytes // requests} bytes")
                key = (name, server)
                best[key] = min(best.get(key, seconds), seconds)
            for server, target in (("bare ASGI", wire.bare_app), ("posenc", app)):
                label, protocol_class = PROTOCOLS[server]
                seconds, nbytes, no_task = await _through(protocol_class, target, request_bytes(name), requests)
                if nbytes < len(wire.PAYLOADS[name.encode()][0]):
                    raise RuntimeError(f"case {name}: {label} wrote {nbytes} bytes a response")
                key = (name, label)
                (taskless.add if no_task else taskless.discard)(key)
                best[key] = min(best.get(key, seconds), seconds)
    return Measured(best, taskless)


class _Transport:
    """What a protocol writes to, counting bytes and the status of each response head."""

    __slots__ = ("closed", "nbytes", "not_ok")

    def __init__(self):
        self.nbytes = 0
        self.not_ok = 0
        self.closed = False

    def write(self, data) -> None:
        self.nbytes += len(data)
        if data[:9] == b"HTTP/1.1 " and data[9:12] != b"200":
            self.not_ok += 1

    def writelines(self, pieces) -> None:
        for piece in pieces:
            self.write(piece)

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default=None):
        return {"peername": ("127.0.0.1", 40000), "sockname": ("127.0.0.1", 8000)}.get(name, default)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def request_bytes(name: str) -> bytes:
    """The case's request as wrk sends it: request line, Host, the case's headers, body."""
    case = wire.CASES[name]
    lines = [f"{case.method} {case.path} HTTP/1.1", "Host: 127.0.0.1:8000"]
    lines += [f"{k}: {v}" for k, v in wire.request_headers(name, case).items()]
    if case.method == "POST":
        lines.append(f"Content-Length: {len(case.body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + case.body


def connection(app, protocol_class):
    """A protocol of `protocol_class` serving `app` on a counting transport, as uvicorn sets it up."""
    config = uvicorn.Config(app, http=protocol_class, lifespan="off", access_log=False, server_header=False,
                            log_config=None)
    config.load()
    state = ServerState()
    protocol = protocol_class(config=config, server_state=state, app_state={}, _loop=asyncio.get_running_loop())
    transport = _Transport()
    protocol.connection_made(transport)
    return protocol, state, transport


async def _through(protocol_class, app, data: bytes, n: int) -> tuple[float, int, bool]:
    """(CPU seconds per request, response bytes per request, whether no request started an ASGI
    task) of `n` requests `data` through a protocol."""
    protocol, state, transport = connection(app, protocol_class)
    tasks = 0
    started = time.process_time()
    for done in range(1, n + 1):
        protocol.data_received(data)
        tasks += len(state.tasks)
        while state.total_requests < done:  # an ASGI task: the loop runs it
            await asyncio.sleep(0)
    seconds = (time.process_time() - started) / n
    if transport.closed:
        raise RuntimeError(f"{protocol_class.__name__} closed a keep-alive connection")
    protocol.connection_lost(None)
    if transport.not_ok:
        raise RuntimeError(f"{transport.not_ok} of {n} responses through {protocol_class.__name__} were not 200")
    return seconds, transport.nbytes // n, tasks == 0


def _body_once(body: bytes):
    async def receive():
        return {"type": "http.request", "body": body, "more_body": False}
    return receive


class Measured(NamedTuple):
    best: dict[tuple[str, str], float]  # (case, server) -> best CPU seconds per request
    taskless: set[tuple[str, str]]  # the (case, server) runs through a protocol that started no ASGI task


def measure(cases: list[str], rounds: int, requests: int) -> Measured:
    """Best CPU seconds per request of each (case, server) over `rounds` rounds of `requests`."""
    shm_dir = tempfile.mkdtemp(prefix="posenc-bench-shm-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None)
    store = TableStore(shm_dir)
    try:
        config = ServiceConfig.from_toml(wire.service_config(shm_dir))
        for table in config.tables:
            store.publish(table.name, table.spec)
        app = create_app(config)

        async def main():
            stop = await _lifespan(app)
            try:
                return await _measure(app, cases, rounds, requests)
            finally:
                await stop()

        return asyncio.run(main())
    finally:
        store.close()
        shutil.rmtree(shm_dir, ignore_errors=True)


def run(cases: list[str], rounds: int, requests: int) -> str:
    best = measure(cases, rounds, requests).best
    (bare_wire, _), (posenc_wire, _) = PROTOCOLS["bare ASGI"], PROTOCOLS["posenc"]
    rows = []
    for name in cases:
        case = wire.CASES[name]
        bare, posenc = best[(name, "bare ASGI")], best[(name, "posenc")]
        bare_http, posenc_http = best[(name, bare_wire)], best[(name, posenc_wire)]
        rows.append([case.label, f"{bare * 1e6:.1f}", f"{posenc * 1e6:.1f}", f"{bare_http * 1e6:.1f}",
                     f"{posenc_http * 1e6:.1f}", f"{bare_http / posenc_http:.0%}",
                     f"{case.encodings / posenc_http:,.0f}"])
    table = markdown_table(["request", "bare ASGI app µs/req", "posenc ASGI app µs/req",
                            "bare + uvicorn's protocol µs/req", "posenc + its protocol µs/req",
                            "vs bare, with protocols", "posenc encodings/s"], rows)
    return (f"{table}\n\nIn-process (no sockets): each app called as ASGI in a loop, then fed the request bytes "
            f"through the HTTP protocol it runs under (the bare app: uvicorn's httptools protocol; posenc: its "
            f"own, which answers prepared requests itself) on a transport that counts what is written; CPU time "
            f"per request, best of {rounds} rounds of {requests}, cases and servers interleaved. The kernel's "
            f"socket work is not in it. Machine: {machine_line()}.\n")
