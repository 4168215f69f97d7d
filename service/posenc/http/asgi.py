"""The ASGI app uvicorn runs: concurrency limit, metrics, the raw single-row route, then FastAPI.

Per request: refuse with 429 beyond `max_concurrency` in-flight requests (per worker);
answer GET /v1/tables/{name}/rows/{position} directly when the fast path can; otherwise
read the body under its cap and deadline (limits.read_body); a computed route's request is
answered by its endpoint called directly (fastcompute) when it succeeds, and everything else
is handed, body replayed, to FastAPI. Every request, whichever way it went, is counted in the metrics under
its route template, status, latency and bytes.
"""

from __future__ import annotations

import time

from fastapi import FastAPI

from .errors import HttpError, error_body
from .fastcompute import FastComputed
from .fastpath import ROW_ROUTE, FastRows
from .limits import ClientGone, read_body, replay
from .service import Service


def _start(status: int, headers: list[tuple[bytes, bytes]], length: int) -> dict:
    return {"type": "http.response.start", "status": status,
            "headers": [*headers, (b"content-length", str(length).encode("ascii"))]}


def _raw(headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
    return [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]


class _Recorder:
    """Wraps `send` to note the status and count body bytes."""

    __slots__ = ("nbytes", "send", "status")

    def __init__(self, send):
        self.send = send
        self.status = 500
        self.nbytes = 0

    async def __call__(self, message):
        if message["type"] == "http.response.start":
            self.status = message["status"]
        elif message["type"] == "http.response.body":
            self.nbytes += len(message.get("body", b""))
        await self.send(message)


class ServiceApp:
    def __init__(self, api: FastAPI, service: Service):
        self.api = api
        self.service = service
        self.fast = FastRows(service.tables)
        self.computed = FastComputed(api, service)
        self.max_concurrency = service.config.limits.max_concurrency
        self.max_body = service.config.limits.max_body_bytes
        self.body_timeout = service.config.server.body_timeout_s

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.api(scope, receive, send)  # lifespan
            return
        started = time.perf_counter()
        service, metrics = self.service, self.service.metrics
        if service.in_flight >= self.max_concurrency:
            status, nbytes = await self._refuse(send, HttpError(
                "too_many_requests", f"over {self.max_concurrency} requests in flight", None,
                headers={"retry-after": "1"}))
            metrics.observe(metrics.route(scope["method"], scope["path"]), status, time.perf_counter() - started,
                            nbytes)
            return
        service.in_flight += 1
        metrics.enter()
        try:
            fast = self.fast.answer(scope)
            if fast is not None:
                body, headers = fast
                await send(_start(200, headers, len(body)))
                await send({"type": "http.response.body", "body": body})
                route, status, nbytes = metrics.layout.index[ROW_ROUTE], 200, len(body)
                metrics.table(hit=True)
            else:
                route, status, nbytes = await self._framework(scope, receive, send)
        finally:
            service.in_flight -= 1
            metrics.leave()
        metrics.observe(route, status, time.perf_counter() - started, nbytes)

    async def _framework(self, scope, receive, send) -> tuple[int, int, int]:
        metrics = self.service.metrics
        try:
            body = await read_body(scope, receive, self.max_body, self.body_timeout)
        except HttpError as err:
            status, nbytes = await self._refuse(send, err)
            return metrics.route(scope["method"], scope["path"]), status, nbytes
        except ClientGone:
            return metrics.route(scope["method"], scope["path"]), 499, 0
        recorder = _Recorder(send)
        computed = self.computed.route_of(scope)
        if computed is not None and await self.computed.serve(scope, receive, recorder, body, computed):
            return metrics.layout.index[("POST", computed[0])], recorder.status, recorder.nbytes
        await self.api(scope, replay(body, receive), recorder)
        return metrics.route(scope["method"], scope["path"]), recorder.status, recorder.nbytes

    @staticmethod
    async def _refuse(send, err: HttpError) -> tuple[int, int]:
        body = error_body(err.code, err.message, err.field)
        await send(_start(err.status, _raw({"content-type": "application/json", **err.headers}), len(body)))
        await send({"type": "http.response.body", "body": body})
        return err.status, len(body)
