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

What this leaves out is uvicorn's own work per request (parsing, the transport: ~30 us here),
which both apps pay alike over the wire; the in-process ratio is therefore much lower than the
wire ratio `posenc bench http` reports, and the difference in microseconds is what the
server's CPU time per request differs by.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from pathlib import Path

from ..config import ServiceConfig
from ..http.app import create_app
from ..shm import TableStore
from . import http as wire
from .timing import machine_line, markdown_table

PROTOCOL = "posenc, in the protocol"


class _Send:
    """A send that notes the status and counts body bytes, nothing else."""

    __slots__ = ("status", "nbytes")

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


async def _measure(app, cases: list[str], rounds: int, requests: int) -> dict[tuple[str, str], float]:
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
    for _ in range(rounds):
        for name in cases:
            for server, target in (("bare ASGI", wire.bare_app), ("posenc", app)):
                seconds, send = await _drive(target, scopes[name], wire.CASES[name].body, requests)
                if send.nbytes // requests != len(wire.PAYLOADS[name.encode()][0]):
                    raise RuntimeError(f"case {name}: {server} answered {send.nbytes // requests} bytes")
                key = (name, server)
                best[key] = min(best.get(key, seconds), seconds)
            seconds = _direct(app, scopes[name], wire.CASES[name].body, requests)
            if seconds is not None:
                key = (name, PROTOCOL)
                best[key] = min(best.get(key, seconds), seconds)
    return best


def _direct(app, scope: dict, body: bytes, n: int) -> float | None:
    """CPU seconds per request of `app.answer_now` (what posenc's HTTP protocol calls to answer a
    request without an ASGI task), or None when it does not answer this request."""
    if app.answer_now(dict(scope), body) is None:
        return None
    started = time.process_time()
    for _ in range(n):
        app.answer_now(dict(scope), body)
    return (time.process_time() - started) / n


def _body_once(body: bytes):
    async def receive():
        return {"type": "http.request", "body": body, "more_body": False}
    return receive


def measure(cases: list[str], rounds: int, requests: int) -> dict[tuple[str, str], float]:
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
    best = measure(cases, rounds, requests)
    rows = []
    for name in cases:
        case = wire.CASES[name]
        bare, posenc = best[(name, "bare ASGI")], best[(name, "posenc")]
        direct = best.get((name, PROTOCOL))
        rows.append([case.label, f"{bare * 1e6:.1f}", f"{posenc * 1e6:.1f}", f"{(posenc - bare) * 1e6:.1f}",
                     f"{bare / posenc:.0%}", "—" if direct is None else f"{direct * 1e6:.1f}",
                     f"{case.encodings / min(posenc, direct or posenc):,.0f}"])
    table = markdown_table(["request", "bare ASGI µs/req", "posenc µs/req", "posenc − bare µs", "vs bare ASGI",
                            "posenc in the protocol µs/req", "posenc encodings/s"], rows)
    return (f"{table}\n\nIn-process: the ASGI apps called in a loop (no sockets, no uvicorn), CPU time per request, "
            f"best of {rounds} rounds of {requests}, cases and apps interleaved; 'in the protocol': the app's "
            f"`answer_now`, what posenc's HTTP protocol calls to answer a request without an ASGI task (— where it "
            f"leaves the request to the app). Machine: {machine_line()}.\n")
