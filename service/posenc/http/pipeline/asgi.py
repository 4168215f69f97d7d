"""The ASGI app uvicorn runs: request id, API key, CORS, limits, metrics, the raw row route, then FastAPI.

Per request, in order:
  * the commonest computed requests (POST /v1/sinusoidal and /v1/rope/cos_sin with a spec,
    POST /v1/tables/{name}/rows: JSON or raw int64 bodies) answered from a prepared plan
    (prepared.py) when nothing about them needs the rest: it applies the same request-id, API-key,
    body, concurrency and budget rules, and hands anything else on, its body replayed;
  * X-Request-Id: the client's (1..128 of [A-Za-z0-9._~:/+=@-], else 422) or a generated one;
    echoed on every response, in every error body and in the service's log lines;
  * the API key, when `server.require_api_key` is set (every route but /healthz and /readyz);
  * CORS, when `server.cors_origins` lists origins (off otherwise: no CORS headers at all);
  * GET /v1/tables/{name}/rows/{position} answered directly when the fast path can;
  * otherwise the body is read under its size cap, deadline and the worker's MemoryBudget
    *before* the request takes a concurrency slot (a client that never sends its body holds
    no slot), then at most `max_concurrency` requests run at once (429 beyond); /healthz,
    /readyz and /metrics are never refused by that limit;
  * a computed route's request is answered by its endpoint called directly (fastcompute) when
    it succeeds; everything else goes, body replayed, to FastAPI.
Every request, whichever way it went, is counted in the metrics under its route template,
status, latency and bytes (and, with `server.access_log`, logged with its request id to
`posenc.access`); an exception no handler caught is logged with the request id,
answered with the JSON 500 body when nothing was sent yet, and counted as a 500.
"""

from __future__ import annotations

import asyncio
import logging
import time

from fastapi import FastAPI

from .cors import Cors
from ..api.errors import REQUEST_ID, HttpError, error_body
from .fastcompute import FastComputed
from .fastpath import ROW_ROUTE, FastRows
from .headers import REQUEST_ID_HEADER, bearer_matches, header, request_id_of
from .limits import ClientGone, read_body, replay
from .prepared import Prepared
from ..runtime.service import CACHE_SHARES, Service

log = logging.getLogger("posenc.http")
access = logging.getLogger("posenc.access")
#: Never refused by the concurrency limit: what orchestrators and Prometheus poll.
UNLIMITED_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
#: Open even when `require_api_key` is set: liveness and readiness probes carry no credentials.
OPEN_PATHS = frozenset({"/healthz", "/readyz"})
#: The one route with its own body limit (limits.max_audit_body_bytes).
AUDIT_PATH = "/v1/audit"
RECORDER = "posenc.recorder"  # the scope key of the request's _Recorder
#: Headers a browser may read from a cross-origin response.
CORS_EXPOSED = ["x-request-id", "x-posenc-dtype", "x-posenc-shape", "x-posenc-attention-factor", "retry-after"]


def _start(status: int, headers: list[tuple[bytes, bytes]], length: int) -> dict:
    return {"type": "http.response.start", "status": status,
            "headers": [*headers, (b"content-length", str(length).encode("ascii"))]}


def _raw(headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
    return [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]


class _Recorder:
    """Wraps `send`: adds X-Request-Id to the response head, notes the status, counts body bytes."""

    __slots__ = ("id_header", "nbytes", "route", "send", "started", "status")

    def __init__(self, send, request_id: str):
        self.send = send
        self.id_header = (REQUEST_ID_HEADER, request_id.encode("ascii"))
        self.status = 500
        self.nbytes = 0
        self.started = False
        self.route: int | None = None  # set when the fast path answered

    async def __call__(self, message):
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.started = True
            message = {**message, "headers": [*message.get("headers", ()), self.id_header]}
        elif message["type"] == "http.response.body":
            self.nbytes += len(message.get("body", b""))
        await self.send(message)


class ServiceApp:
    def __init__(self, api: FastAPI, service: Service):
        self.api = api
        self.service = service
        self.fast = FastRows(service.tables, service.cache(CACHE_SHARES["rows"]))
        config = service.config
        self.computed = FastComputed(api, service)
        self.max_concurrency = config.limits.max_concurrency
        self.max_body = config.limits.max_body_bytes
        self.max_audit_body = config.limits.max_audit_body_bytes  # POST /v1/audit: a long cache's cos/sin pair
        self.body_timeout = config.server.body_timeout_s
        self.api_key = config.api_key.encode() if config.server.require_api_key else None
        self.access_log = config.server.access_log
        self.inner = self._serve
        #: The commonest computed requests, from prepared plans (not with CORS: its preflight and
        #: headers are the general path's).
        self.prepared = None if config.server.cors_origins else \
            Prepared(service, self.max_body, self.max_concurrency, self.api_key)
        if config.server.cors_origins:
            self.inner = Cors(self._serve, allow_origins=list(config.server.cors_origins),
                              allow_methods=["GET", "HEAD", "POST", "PUT", "DELETE"],
                              allow_headers=["authorization", "content-type", "accept", "x-request-id"],
                              expose_headers=CORS_EXPOSED, max_age=600)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.api(scope, receive, send)  # lifespan
            return
        started = time.perf_counter()
        if self.prepared is not None and scope["method"] == "POST":
            outcome = await self.prepared.serve(scope, receive, send)
            if type(outcome) is tuple:  # answered: (route, body bytes, request id)
                self._account(scope, outcome[0], 200, started, outcome[1], outcome[2])
                return
            receive = outcome  # what it received, replayed
        request_id, valid = request_id_of(scope)
        token = REQUEST_ID.set(request_id)
        recorder = scope[RECORDER] = _Recorder(send, request_id)  # `send` below may be CORS's wrapper of it
        try:
            if not valid:
                await self._refuse(recorder, HttpError("invalid_parameter", "X-Request-Id must be 1..128 characters "
                                                       "of [A-Za-z0-9._~:/+=@-]", "x-request-id"))
            else:
                await self.inner(scope, receive, recorder)
        except asyncio.CancelledError:  # uvicorn's drain limit expired at shutdown: the request ends here
            if not recorder.started:
                await self._refuse(recorder, HttpError("not_ready", "the server is shutting down; retry elsewhere",
                                                       None, headers={"connection": "close", "retry-after": "1"}))
            else:
                recorder.status = 503
        except Exception:  # noqa: BLE001 - the last resort: a JSON 500, logged and counted
            log.exception("unhandled error on %s %s (request %s)", scope["method"], scope["path"][:200], request_id)
            if not recorder.started:
                await self._refuse(recorder, HttpError("internal", f"internal error (logged by the server as request "
                                                                   f"{request_id})"))
            recorder.status = 500
        finally:
            REQUEST_ID.reset(token)
        route = recorder.route if recorder.route is not None else \
            self.service.metrics.route(scope["method"], scope["path"])
        self._account(scope, route, recorder.status, started, recorder.nbytes, request_id)

    def answer_now(self, scope, body: bytes):
        """(headers, body) of the 200 of a request the fast paths answer (the row route, prepared
        plans), found without awaiting anything and counted as answered; None for any other
        request, which then goes to this app as usual. For posenc's HTTP protocol (protocol.py),
        which writes it at once: nothing else runs before the bytes are in the transport, so the
        budget and metrics see it as sent. Not with CORS (its headers are the general path's) nor
        the access log (which logs the client uvicorn's proxy-headers middleware finds)."""
        if self.prepared is None or self.access_log:
            return None
        started = time.perf_counter()
        method = scope["method"]
        if method == "POST":
            answer = self.prepared.answer(scope, body)
            if answer is None:
                return None
            answer.done()
            route, headers, payload, request_id = answer.route, answer.headers, answer.payload, answer.request_id
        elif method == "GET" and not body:
            request_id, valid = request_id_of(scope)
            if not valid or (self.api_key is not None and not self._authorized(scope)) \
                    or self.service.in_flight >= self.max_concurrency:
                return None
            fast = self.fast.answer(scope)
            if fast is None:
                return None
            payload, headers = fast
            headers = [*headers, (b"content-length", str(len(payload)).encode("ascii")),
                       (REQUEST_ID_HEADER, request_id.encode("ascii"))]
            route = self.service.metrics.layout.index[ROW_ROUTE]
            self.service.metrics.table(hit=True)
        else:
            return None
        self._account(scope, route, 200, started, len(payload), request_id)
        return headers, payload

    def _account(self, scope, route: int, status: int, started: float, nbytes: int, request_id: str) -> None:
        """Count a finished request in the metrics (and the access log), whichever path answered it."""
        seconds = time.perf_counter() - started
        self.service.metrics.observe(route, status, seconds, nbytes)
        if self.access_log:
            client = scope.get("client") or ("-", 0)
            access.info('%s "%s %s" %d %d B %.2f ms request_id=%s', client[0], scope["method"], scope["path"][:200],
                        status, nbytes, seconds * 1e3, request_id)

    async def _serve(self, scope, receive, send):
        path = scope["path"]
        if self.api_key is not None and path not in OPEN_PATHS and not self._authorized(scope):
            await self._refuse(send, HttpError("unauthorized", "send Authorization: Bearer <POSENC_API_KEY>",
                                               "authorization", headers={"www-authenticate": "Bearer"}))
            return
        limited = path not in UNLIMITED_PATHS
        fast = self.fast.answer(scope)
        if fast is not None:
            if limited and self.service.in_flight >= self.max_concurrency:
                await self._too_many(send)
                return
            body, headers = fast
            await send(_start(200, headers, len(body)))
            await send({"type": "http.response.body", "body": body})
            scope[RECORDER].route = self.service.metrics.layout.index[ROW_ROUTE]
            self.service.metrics.table(hit=True)
            return
        reservation = self.service.budget.take(0, "the request body")
        try:
            try:  # no concurrency slot is held while the body arrives
                max_body = self.max_audit_body if path == AUDIT_PATH else self.max_body
                body = await read_body(scope, receive, max_body, self.body_timeout, reservation)
            except HttpError as err:
                await self._refuse(send, err)
                return
            except ClientGone:
                scope[RECORDER].status = 499
                return
            if limited and self.service.in_flight >= self.max_concurrency:
                await self._too_many(send)
                return
            await self._framework(scope, receive, send, body)
        finally:
            reservation.release()

    async def _framework(self, scope, receive, send, body: bytes) -> None:
        """A computed route's successful answer straight from its endpoint (fastcompute), else FastAPI."""
        service = self.service
        service.in_flight += 1
        service.metrics.enter()
        try:
            computed = self.computed.route_of(scope)
            if computed is not None and await self.computed.serve(scope, receive, send, body, computed):
                scope[RECORDER].route = service.metrics.layout.index[("POST", computed[0])]
                return
            await self.api(scope, replay(body, receive), send)
        finally:
            service.in_flight -= 1
            service.metrics.leave()

    def _authorized(self, scope) -> bool:
        return bearer_matches(header(scope, b"authorization"), self.api_key)

    async def _too_many(self, send) -> None:
        await self._refuse(send, HttpError("too_many_requests", f"over {self.max_concurrency} requests in flight",
                                           None, headers={"retry-after": "1"}))

    @staticmethod
    async def _refuse(send, err: HttpError) -> None:
        body = error_body(err.code, err.message, err.field)
        await send(_start(err.status, _raw({"content-type": "application/json", **err.headers}), len(body)))
        await send({"type": "http.response.body", "body": body})
