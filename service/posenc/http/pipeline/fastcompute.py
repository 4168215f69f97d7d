"""The computed routes (POST /v1/sinusoidal, /v1/rope/..., ALiBi, T5, table rows) without FastAPI's layers.

For these routes FastAPI's own machinery (matching the path against every route, solving
the endpoint's dependencies, the exception and middleware stack) costs several times what the
endpoint does. Their endpoints take nothing but the request (and the rows route its table
name), so here the same endpoint function is called directly on a Starlette `Request` whose
body is the one `asgi.py` already read under its cap, and the `Response` it returns is sent
as FastAPI would send it: one validation, one computation, one encoder for both ways in.

Only successful requests are answered here. An endpoint that raises (bad input, an output
over a limit, anything) is retried through FastAPI, whose exception handlers give the error
response: errors are FastAPI's by construction. The endpoints count the table hit/miss metric
only once their answer is ready, so a request retried that way is counted once.
"""

from __future__ import annotations

import inspect

from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette.requests import Request

from ..api.routes import ROUTERS

#: The POST routes answered here, when their endpoints take only what this module passes.
ROUTES = ("/v1/sinusoidal", "/v1/rope/cos_sin", "/v1/rope/apply", "/v1/rope/inv_freq", "/v1/alibi/slopes",
          "/v1/alibi/bias", "/v1/t5/buckets", "/v1/tables/{name}/rows")
_ROWS = "/v1/tables/{name}/rows"
_ROWS_PREFIX, _ROWS_SUFFIX = "/v1/tables/", "/rows"


class _Request(Request):
    """A Starlette request whose body is already in memory (read by asgi.py under its limits)."""

    def __init__(self, scope, body: bytes):
        super().__init__(scope)
        self._body = body  # Request.body() returns it; nothing is read from the connection again


def _endpoints() -> dict[str, object]:
    """Template -> endpoint for the ROUTES whose endpoint takes the request (and `name`) only."""
    found = {}
    for route in (route for router in ROUTERS for route in router.routes):
        if not isinstance(route, APIRoute) or route.path not in ROUTES or route.methods != {"POST"}:
            continue
        dependant = route.dependant
        plain = not (dependant.dependencies or dependant.query_params or dependant.header_params
                     or dependant.cookie_params or dependant.body_params)
        path_params = {param.name for param in dependant.path_params}
        expected = {"name"} if route.path == _ROWS else set()
        signature = set(inspect.signature(route.endpoint).parameters)
        if plain and path_params == expected and signature == {dependant.request_param_name, *expected}:
            found[route.path] = route.endpoint
    return found


class FastComputed:
    """Answers the computed routes' successful requests by calling their endpoints directly."""

    def __init__(self, api: FastAPI, service):
        self.api = api
        self.service = service
        self.endpoints = _endpoints()

    def route_of(self, scope) -> tuple[str, tuple] | None:
        """(route template, endpoint arguments) of a request this module may answer, else None."""
        if scope["method"] != "POST":
            return None
        path = scope["path"]
        if path in self.endpoints:
            return path, ()
        if path.startswith(_ROWS_PREFIX) and path.endswith(_ROWS_SUFFIX) and _ROWS in self.endpoints:
            name = path[len(_ROWS_PREFIX):-len(_ROWS_SUFFIX)]
            # only an attached table: its name passed every check FastAPI's path parameter makes
            if "/" not in name and self.service.tables.get(name) is not None:
                return _ROWS, (name,)
        return None

    async def serve(self, scope, receive, send, body: bytes, route: tuple[str, tuple]) -> bool:
        """Answer a request of `route` (from route_of) by its endpoint: True when it was answered,
        False when it must go to FastAPI."""
        template, args = route
        scope["app"] = self.api  # what Starlette sets before any endpoint runs; request.app reads it
        try:
            response = await self.endpoints[template](_Request(scope, body), *args)
        except Exception:  # noqa: BLE001 - FastAPI answers it again and its handlers give the error
            return False
        await response(scope, receive, send)
        return True
