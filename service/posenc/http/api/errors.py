"""The one error body every failure uses: {"error": {"code", "message", "field", "request_id"}}.

Library errors (`PosencError`, which names the field) become 422, an output over the limit
413 (a shared-memory refusal names files under the server's shm directory: the client gets its
message without that directory, the server's log all of it); FastAPI's own validation and
routing errors are reshaped to the same body (a 405 lists every method the path has), and an
unexpected exception is a logged 500 that reveals nothing of the request. `request_id` is the
request's X-Request-Id (null when the request never reached the app, e.g. a malformed head).
"""

from __future__ import annotations

import logging
from contextvars import ContextVar

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import compile_path

from ...errors import OutputTooLarge, PosencError, PositionBeyondLimit
from ...shm import ShmError
from ...shm.paths import resolve_root

log = logging.getLogger("posenc.http")
#: The X-Request-Id of the request this task is handling (set by the ASGI layer, read by error bodies and logs).
REQUEST_ID: ContextVar[str | None] = ContextVar("posenc_request_id", default=None)

#: Every error code the service answers with, and its HTTP status.
ERROR_STATUS = {
    "invalid_body": 400,
    "unsupported_upgrade": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "not_found": 404,
    "method_not_allowed": 405,
    "not_acceptable": 406,
    "request_timeout": 408,
    "conflict": 409,
    "body_too_large": 413,
    "too_many_positions": 413,
    "output_too_large": 413,
    "unsupported_media_type": 415,
    "invalid_parameter": 422,
    "too_many_requests": 429,
    "head_too_large": 431,
    "internal": 500,
    "not_implemented": 501,
    "busy": 503,
    "not_ready": 503,
}

_CODE_FOR_STATUS = {401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed",
                    406: "not_acceptable", 413: "body_too_large", 415: "unsupported_media_type"}


class HttpError(Exception):
    """A refusal with a code from ERROR_STATUS; `field` names the part of the request at fault."""

    def __init__(self, code: str, message: str, field: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.code = code
        self.status = ERROR_STATUS[code]
        self.message = message
        self.field = field
        self.headers = headers or {}


def error_body(code: str, message: str, field: str | None = None) -> bytes:
    return orjson.dumps({"error": {"code": code, "message": message, "field": field,
                                   "request_id": REQUEST_ID.get()}})


def error_response(err: HttpError) -> Response:
    return Response(error_body(err.code, err.message, err.field), status_code=err.status,
                    media_type="application/json", headers=err.headers)


def from_posenc_error(exc: PosencError, shm_dir: str) -> HttpError:
    """The answer to a library error; `shm_dir` is the server's shm directory, which it never names."""
    code = "output_too_large" if isinstance(exc, OutputTooLarge) else "invalid_parameter"
    # a position over the limit: the caller is told the limit, not how the server's operator raises it
    message = exc.caller_message if isinstance(exc, PositionBeyondLimit) else str(exc)
    if isinstance(exc, ShmError):
        message = without_directory(message, shm_dir)
        if message != str(exc):
            log.warning("%s (request %s)", exc, REQUEST_ID.get())  # the operator's copy, paths and all
    return HttpError(code, message, exc.field)


def without_directory(message: str, shm_dir: str) -> str:
    """`message` with files under `shm_dir` named relative to it, and the directory itself as
    "the shm directory"."""
    root = str(resolve_root(shm_dir))
    return message.replace(root + "/", "").replace(root, "the shm directory")


async def _http_error(request: Request, exc: HttpError) -> Response:
    return error_response(exc)


async def _posenc_error(request: Request, exc: PosencError) -> Response:
    return error_response(from_posenc_error(exc, request.app.state.service.config.server.shm_dir))


async def _validation_error(request: Request, exc: RequestValidationError) -> Response:
    first = exc.errors()[0]
    loc = [str(part) for part in first.get("loc", ())]
    field = ".".join(loc[1:] if loc and loc[0] in ("body", "query", "path", "header") else loc) or None
    return error_response(HttpError("invalid_parameter", f"{field}: {first.get('msg', 'invalid')}", field))


def allowed_methods(request: Request) -> list[str]:
    """Every method some route of the app answers on this path (Starlette's 405 lists only the first route's)."""
    methods: set[str] = set()
    for regex, route_methods in request.app.state.route_methods:
        if regex.match(request.url.path):
            methods |= route_methods
    return sorted(methods)


async def _starlette_error(request: Request, exc: StarletteHTTPException) -> Response:
    code = _CODE_FOR_STATUS.get(exc.status_code, "invalid_body" if exc.status_code < 500 else "internal")
    headers = dict(getattr(exc, "headers", None) or {})
    message = str(exc.detail)
    if exc.status_code == 405:
        headers = {"allow": ", ".join(allowed_methods(request))}
        message = f"{request.method} is not allowed here; allowed: {headers['allow']}"
    return Response(error_body(code, message), status_code=exc.status_code, media_type="application/json",
                    headers=headers)


async def _unexpected(request: Request, exc: Exception) -> Response:
    # Starlette re-raises after this answer; the ASGI layer (asgi.py) logs it with the request id and counts it.
    return error_response(HttpError("internal", f"internal error (logged by the server as request "
                                                f"{REQUEST_ID.get()})"))


def install(app: FastAPI, routes: list[tuple[str, str]]) -> None:
    """Route every error through error_body; `routes` are the app's (method, path template) pairs."""
    by_path: dict[str, set[str]] = {}
    for method, path in routes:
        by_path.setdefault(path, set()).add(method)
    app.state.route_methods = [(compile_path(path)[0], methods) for path, methods in by_path.items()]
    app.add_exception_handler(HttpError, _http_error)
    app.add_exception_handler(PosencError, _posenc_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _starlette_error)
    app.add_exception_handler(Exception, _unexpected)
