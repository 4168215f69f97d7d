"""CORS (`server.cors_origins`): Starlette's middleware, with a refused preflight answered in the
service's JSON error body (403 `forbidden`, naming the request header at fault) instead of its
plain-text 400."""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import Response

from ..api.errors import HttpError, error_response

#: Starlette's name for each refused part of a preflight -> the request header that carried it.
_FAILED_HEADER = {"origin": "origin", "method": "access-control-request-method",
                  "headers": "access-control-request-headers",
                  "private-network": "access-control-request-private-network"}


class Cors(CORSMiddleware):
    def preflight_response(self, request_headers: Headers) -> Response:
        response = super().preflight_response(request_headers)
        if response.status_code < 400:
            return response
        failures = response.body.decode("latin-1").removeprefix("Disallowed CORS ").split(", ")
        refused = error_response(HttpError("forbidden", f"CORS preflight refused: {', '.join(failures)} not "
                                           "allowed (server.cors_origins and the methods and headers the API takes)",
                                           _FAILED_HEADER.get(failures[0])))
        for name in ("vary", "access-control-allow-methods", "access-control-allow-headers"):
            if name in response.headers:
                refused.headers[name] = response.headers[name]
        return refused
