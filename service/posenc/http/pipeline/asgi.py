"""The ASGI app uvicorn runs: request id, API key, CORS, limits, metrics, the raw row route, then FastAPI.

Per request, in order, each rule once (the protocol's `answer_now` and the ASGI lane,
`_asgi_lane`, which sends a `now` plan's answer before the request's recorder and context are
made, call the same functions, through `_now_answer`):
  * X-Request-Id: the client's (1..128 of [A-Za-z0-9._~:/+=@-], else 422) or a generated one;
    echoed on every response, in every error body and in the service's log lines;
  * what the service does not speak (`headers.unspoken`): a body with a content coding (415), a
    WebSocket handshake (400);
  * CORS, when `server.cors_origins` lists origins (off otherwise: no CORS headers at all);
  * the API key, when `server.require_api_key` is set (every route but /healthz and /readyz);
  * the body is read under its size cap, deadline and the worker's MemoryBudget *before* the
    request takes a concurrency slot (a client that never sends its body holds no slot), then at
    most `max_concurrency` requests run at once (429 beyond); /healthz, /readyz and /metrics are
    never refused by that limit;
  * the router (plans.py): the plans registered for the request's method and route template, in
    order (the row route, the prepared spec and rows plans, the computed endpoints); the first
    that answers sends the 200; everything else goes, body replayed, to FastAPI.
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

from ..api.errors import REQUEST_ID, HttpError, error_body
from ..runtime.service import CACHE_SHARES, Service
from .cors import Cors
from .fastcompute import TEMPLATE, FastComputed
from .fastpath import FastRows
from .headers import REQUEST_ID_HEADER, bearer_matches, header, plain, request_id_of, unspoken
from .limits import ClientGone, read_body, replay, replay_message, resumed, started
from .plans import Router, plan_table
from .prepared import Prepared

log = logging.getLogger("posenc.http")
access = logging.getLogger("posenc.access")
#: Never refused by the concurrency limit: what orchestrators and Prometheus poll.
UNLIMITED_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
#: Open even when `require_api_key` is set: liveness and readiness probes carry no credentials.
OPEN_PATHS = frozenset({"/healthz", "/readyz"})
#: The one route with its own body limit (limits.max_audit_body_bytes).
AUDIT_PATH = "/v1/audit"
RECORDER = "posenc.recorder"  # the scope key of the request's _Recorder
PLAN = "posenc.plan"  # the scope key of the name of the plan that answered (none: FastAPI)
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


def _first_body(scope, receive):
    """(the request's whole body, or None when it is not complete in its first message; the receive
    to go on with, which replays what this read). A GET's is b"" unread: the row plan reads none."""
    if scope["method"] == "GET":
        return b"", receive
    first = started(receive())
    if type(first) is not dict:  # the body is still on its way: read_body reads it
        return None, resumed(first, receive)
    body = first.get("body", b"") if first["type"] == "http.request" and not first.get("more_body") else None
    return body, replay_message(first, receive)


class ServiceApp:
    """The pipeline: the rules, once, then the plans (plans.py) or FastAPI. With `plans=False` the
    plan table is empty and FastAPI answers everything (the equivalence tests' reference)."""

    def __init__(self, api: FastAPI, service: Service, plans: bool = True):
        self.api = api
        self.service = service
        config = service.config
        self.fast = FastRows(service, service.tables, service.cache(CACHE_SHARES["rows"]))
        self.prepared = Prepared(service)
        self.computed = FastComputed(api, service)
        self.router = Router(plan_table(self.fast, self.prepared, self.computed, service) if plans else [])
        self.max_concurrency = config.limits.max_concurrency
        self.max_body = config.limits.max_body_bytes
        self.max_audit_body = config.limits.max_audit_body_bytes  # POST /v1/audit: a long cache's cos/sin pair
        self.body_timeout = config.server.body_timeout_s
        self.api_key = config.api_key.encode() if config.server.require_api_key else None
        self.access_log = config.server.access_log
        self.inner = self._serve
        #: Whether a `now` plan's answer may be sent by the ASGI lane (`_asgi_lane`, ahead of the
        #: recorder) and by the protocol (answer_now): not with CORS (its preflight and headers are
        #: the ASGI path's) nor the access log (it logs the client uvicorn's proxy-headers middleware finds).
        self.now = plans and not config.server.cors_origins and not self.access_log
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
        lane = None  # None: the general path looks at the first message; else whether the ASGI lane tried the plans
        if self.now:
            plans = self.router.find(scope["method"], scope["path"])[1]
            if plans:
                body, receive = _first_body(scope, receive)
                lane = False  # the body is on its way: the general path reads it, then tries the plans
                if body is not None:
                    answered = await self._asgi_lane(scope, send, body, plans, started)
                    if answered:
                        return
                    lane = None if answered is None else True  # a plan raised: the general path runs it again
        request_id, valid = request_id_of(scope)
        token = REQUEST_ID.set(request_id)
        recorder = scope[RECORDER] = _Recorder(send, request_id)  # `send` below may be CORS's wrapper of it
        try:
            refusal = unspoken(scope) if valid else HttpError(
                "invalid_parameter", "X-Request-Id must be 1..128 characters of [A-Za-z0-9._~:/+=@-]", "x-request-id")
            if refusal is not None:
                await self._refuse(recorder, refusal)
            elif lane is not None:  # no CORS (the ASGI lane's condition): `inner` is _serve itself
                await self._serve(scope, receive, recorder, lane)
            else:
                await self.inner(scope, receive, recorder)
        except (asyncio.CancelledError, Exception) as error:  # noqa: BLE001 - the last resort
            await self._ended_by(error, scope, recorder, request_id)
        finally:
            REQUEST_ID.reset(token)
        route = recorder.route if recorder.route is not None else \
            self.service.metrics.route(scope["method"], scope["path"])
        self._account(scope, route, recorder.status, started, recorder.nbytes, request_id)

    async def _ended_by(self, error: BaseException, scope, recorder: _Recorder, request_id: str) -> None:
        """The one policy for a request whose handling raised, whichever way it went: uvicorn's
        drain limit expiring at shutdown (CancelledError) ends it with a 503 (sent when nothing was
        yet); any other exception is logged with the request id, answered with the JSON 500 body
        when nothing was sent yet, and counted as a 500. Notes the status on `recorder`."""
        if isinstance(error, asyncio.CancelledError):
            if not recorder.started:
                await self._refuse(recorder, HttpError("not_ready", "the server is shutting down; retry elsewhere",
                                                       None, headers={"connection": "close", "retry-after": "1"}))
            else:
                recorder.status = 503
            return
        log.error("unhandled error on %s %s (request %s)", scope["method"], scope["path"][:200], request_id,
                  exc_info=error)
        if not recorder.started:
            await self._refuse(recorder, HttpError("internal", f"internal error (logged by the server as request "
                                                               f"{request_id})"))
        recorder.status = 500

    async def _asgi_lane(self, scope, send, body: bytes, plans, started: float) -> bool | None:
        """A request whose whole body is at hand, answered by a `now` plan before the request's
        recorder and context exist (what they cost is most of a small answer's time): the rules of
        `_now_answer`, the answer sent to uvicorn's `send` directly, counted as `__call__` counts
        what it answers. True when answered; False when no plan answers it (or a rule would refuse
        it: the general path then answers or refuses it); None when a plan raised: the general path
        runs the plans again, inside its error handling, and reports what goes wrong."""
        try:
            found = self._now_answer(scope, body, plans)
        except Exception:  # noqa: BLE001 - see None above
            return None
        if found is None:
            return False
        request_id, plan, answer = found
        service = self.service
        status, head_sent = 200, False
        service.in_flight += 1
        service.metrics.enter()
        try:
            await send({"type": "http.response.start", "status": 200, "headers": answer.headers})
            head_sent = True
            await send({"type": "http.response.body", "body": answer.payload})
        except (asyncio.CancelledError, Exception) as error:  # noqa: BLE001 - as the general path ends it
            recorder = _Recorder(send, request_id)
            recorder.started = head_sent
            token = REQUEST_ID.set(request_id)
            try:
                await self._ended_by(error, scope, recorder, request_id)
            finally:
                REQUEST_ID.reset(token)
            status = recorder.status
        finally:
            service.in_flight -= 1
            service.metrics.leave()
            answer.done()
        scope[PLAN] = plan.name
        self._account(scope, answer.route, status, started, len(answer.payload) if head_sent else 0, request_id)
        return True

    def answer_now(self, scope, body: bytes):
        """The `Answer` (prepared.py) of the 200 of a complete request a `now` plan answers, found without
        awaiting anything and counted as answered; None for any other request, which then goes to
        this app as usual. For posenc's HTTP protocol (protocol.py), which writes it at once:
        nothing else runs before the bytes are in the transport, so the budget and metrics see it
        as sent. The same rules as the ASGI path, from the same functions; a request one of them
        would refuse is declined here and refused there."""
        if not self.now:
            return None
        plans = self.router.find(scope["method"], scope["path"])[1]
        if not plans:
            return None
        started = time.perf_counter()
        found = self._now_answer(scope, body, plans)
        if found is None:
            return None
        request_id, _, answer = found
        answer.done()
        self._account(scope, answer.route, 200, started, len(answer.payload), request_id)
        return answer

    def _now_answer(self, scope, body: bytes, plans):
        """(request id, plan, Answer with X-Request-Id in its headers) of a complete request a `now`
        plan answers, for the ASGI lane and answer_now: the rules the general path applies before its
        plans, from the same functions -- a valid X-Request-Id, a plain request (`unspoken` has
        nothing to say of it), the API key, then `_first_answer`'s body limit, concurrency and
        budget; None when one of them would refuse it (the general path refuses it then) or no
        plan answers it."""
        request_id, valid = request_id_of(scope)
        if not valid or not plain(scope) or (self.api_key is not None and not self._authorized(scope)):
            return None
        found = self._first_answer(scope, body, plans)
        if found is None:
            return None
        plan, answer = found
        answer.headers.append((REQUEST_ID_HEADER, request_id.encode("ascii")))
        return request_id, plan, answer

    def _account(self, scope, route: int, status: int, started: float, nbytes: int, request_id: str) -> None:
        """Count a finished request in the metrics (and the access log), whichever path answered it."""
        seconds = time.perf_counter() - started
        self.service.metrics.observe(route, status, seconds, nbytes)
        if self.access_log:
            client = scope.get("client") or ("-", 0)
            access.info('%s "%s %s" %d %d B %.2f ms request_id=%s', client[0], scope["method"], scope["path"][:200],
                        status, nbytes, seconds * 1e3, request_id)

    async def _serve(self, scope, receive, send, lane: bool | None = None):
        """The rules in order (after the request id): API key, body (size, deadline, budget),
        concurrency; then the plans of the request's shape, then FastAPI. `lane`: None when the
        ASGI lane did not run (the first message is looked at here), else whether it put the request to
        the `now` plans already."""
        path = scope["path"]
        if self.api_key is not None and not self._authorized(scope):
            await self._refuse(send, HttpError("unauthorized", "send Authorization: Bearer <POSENC_API_KEY>",
                                               "authorization", headers={"www-authenticate": "Bearer"}))
            return
        plans = self.router.find(scope["method"], path)[0]
        tried = bool(lane)  # whether the `now` plans have seen this request
        if plans and plans[0].now and lane is None:  # a body complete in its first message: no read_body
            body, receive = _first_body(scope, receive)
            if body is not None:
                tried = True
                found = self._first_answer(scope, body, plans)
                if found is not None:
                    await self._send(scope, send, *found)
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
            if self._crowded(path):
                await self._too_many(send)
                return
            await self._answer(scope, receive, send, body, plans, tried)
        finally:
            reservation.release()

    def _first_answer(self, scope, body: bytes, plans):
        """(plan, Answer) of a request whose whole body came in its first message, answered by a
        `now` plan under the same rules as `answer_now` (body limit, budget, concurrency), the body's
        bytes held in the budget until the answer is done; None when none answers it (or a rule
        would refuse it: the general path then refuses it)."""
        budget = self.service.budget
        size = len(body)
        if size > self.max_body or (self.service.in_flight >= self.max_concurrency and self._crowded(scope["path"])) \
                or (size and not budget.try_take(size)):
            return None
        try:
            for plan in plans:
                if not plan.now:
                    break
                answer = plan.answer(scope, body)
                if answer is not None:
                    answer.held += size  # the body's bytes, given back with the answer's own (Answer.done)
                    return plan, answer
        except BaseException:
            budget.give_back(size)
            raise
        budget.give_back(size)
        return None

    async def _send(self, scope, send, plan, answer) -> None:
        """Send a `now` plan's 200, counted in flight while it is written; `answer.done()` after."""
        service = self.service
        service.in_flight += 1
        service.metrics.enter()
        try:
            await send({"type": "http.response.start", "status": 200, "headers": answer.headers})
            await send({"type": "http.response.body", "body": answer.payload})
        finally:
            service.in_flight -= 1
            service.metrics.leave()
            answer.done()
        scope[RECORDER].route = answer.route
        scope[PLAN] = plan.name

    async def _answer(self, scope, receive, send, body: bytes, plans, tried: bool) -> None:
        """The router: the first plan of the request's shape that answers it (the `now` ones, which
        come first, unless `_first_answer` tried them already), else FastAPI."""
        if not tried:
            for plan in plans:
                if not plan.now:
                    break
                answer = plan.answer(scope, body)
                if answer is not None:
                    await self._send(scope, send, plan, answer)
                    return
        service = self.service
        service.in_flight += 1
        service.metrics.enter()
        try:
            for plan in plans:
                if not plan.now and await plan.answer(scope, receive, send, body):
                    scope[RECORDER].route = service.metrics.layout.index[("POST", scope[TEMPLATE])]
                    scope[PLAN] = plan.name
                    return
            await self.api(scope, replay(body, receive), send)
        finally:
            service.in_flight -= 1
            service.metrics.leave()

    def _authorized(self, scope) -> bool:
        """The API-key rule: every path but the probes' needs `Bearer <key>` when one is required."""
        return self.api_key is None or scope["path"] in OPEN_PATHS or \
            bearer_matches(header(scope, b"authorization"), self.api_key)

    def _crowded(self, path: str) -> bool:
        """The concurrency rule: over `max_concurrency` requests in flight (never the probes, /metrics)."""
        return self.service.in_flight >= self.max_concurrency and path not in UNLIMITED_PATHS

    async def _too_many(self, send) -> None:
        await self._refuse(send, HttpError("too_many_requests", f"over {self.max_concurrency} requests in flight",
                                           None, headers={"retry-after": "1"}))

    @staticmethod
    async def _refuse(send, err: HttpError) -> None:
        body = error_body(err.code, err.message, err.field)
        await send(_start(err.status, _raw({"content-type": "application/json", **err.headers}), len(body)))
        await send({"type": "http.response.body", "body": body})
