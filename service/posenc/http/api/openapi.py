"""OpenAPI for routes that parse their own bodies: JSON or binary requests, JSON or binary responses.

The routes read `Request` themselves (FastAPI's body parsing cannot take a JSON object and a
.npy body on the same route), so their request bodies, the query form of their fields and
their response media types are declared here, and every request model a body refers to is
added to the schema's components (`request_body` records it: no reference without its schema).
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from .calls import ARRAY_FIELDS
from .codecs import JSON, NPY, RAW
from .schemas import ArrayResponse, ErrorResponse, _Strict

_BINARY = {"schema": {"type": "string", "format": "binary"}}
_REF = "#/components/schemas/{model}"
_ERROR_STATUSES = {
    400: "Malformed body", 401: "Missing or wrong API key",
    403: "Table management is off (no POSENC_API_KEY)",
    404: "No such table (GET of one row: no row at that position)", 406: "Accept names no supported media type", 408: "Request body not received in time",
    409: "A configured table, or an output dtype wider than the table stores",
    413: "Body, positions or output (encoded, e.g. as JSON) over the limit", 415: "Unsupported Content-Type",
    422: "A parameter (or X-Request-Id) was rejected (`field` names it)", 429: "Too many requests in flight (Retry-After)",
    503: "Not ready, or this worker's buffered-bytes budget is spent (Retry-After)",
}


#: What any route that reads arrays may answer.
_ARRAY_ERRORS = (400, 404, 406, 408, 409, 413, 415, 422, 429, 503)
#: Paths the concurrency limit and the API-key option never apply to (see asgi.py).
_UNLIMITED = ("/healthz", "/readyz", "/metrics")
_OPEN = ("/healthz", "/readyz")
_REQUEST_ID = {"name": "X-Request-Id", "in": "header", "required": False,
               "description": "Your id for this request (generated when absent or empty); echoed in the response, "
               "error bodies and the server's logs.",
               "schema": {"type": "string", "pattern": "^[A-Za-z0-9._~:/+=@-]{0,128}$"}}
_REQUEST_ID_OUT = {"description": "The request's id (yours, or generated)", "schema": {"type": "string"}}


def error_responses(*statuses: int) -> dict:
    chosen = statuses or _ARRAY_ERRORS
    return {status: {"model": ErrorResponse, "description": _ERROR_STATUSES[status]} for status in chosen}


def array_responses(model: type[BaseModel] = ArrayResponse) -> dict:
    return {200: {"model": model, "description": "The array: JSON, .npy or raw bytes (see X-Posenc-Dtype, "
                  "X-Posenc-Shape)",
                  "content": {NPY: _BINARY, RAW: _BINARY},
                  "headers": {"X-Posenc-Dtype": {"schema": {"type": "string"}, "description": "binary: dtype"},
                              "X-Posenc-Shape": {"schema": {"type": "string"},
                                                 "description": "binary: comma-separated shape"}}},
            **error_responses()}


#: The request models that bodies refer to (filled by request_body as the routes are declared).
REQUEST_MODELS: dict[str, type[BaseModel]] = {}


def request_body(model: type[_Strict], *, required: bool = True) -> dict:
    """openapi_extra for a route reading `model` (calls.read_call): a JSON body; where the model has
    a REQUIRED_ARRAY, or a binary body (that array) with the other fields as query parameters.
    `required=False` for a route whose every field has a default, which answers a request without a body."""
    known = REQUEST_MODELS.setdefault(model.__name__, model)
    assert known is model, f"two request models named {model.__name__}"
    content = {JSON: {"schema": {"$ref": _REF.format(model=model.__name__)}}}
    if model.REQUIRED_ARRAY is None:
        return {"requestBody": {"required": required, "content": content}}
    content[NPY] = _BINARY
    content[RAW] = _BINARY
    return {"requestBody": {"required": True, "content": content}, "parameters": query_parameters(model)}


def query_parameters(model: type[BaseModel]) -> list[dict]:
    """The model's non-array fields as optional query parameters (objects and lists JSON-encoded)."""
    schema = model.model_json_schema(ref_template=_REF)
    params = []
    for name, prop in schema["properties"].items():
        if name in ARRAY_FIELDS:
            continue
        description = (prop.get("description", "") + " With a binary body, the query carries this field; with a "
                       "JSON body, the body or the query may (not both: 422).").strip()
        param = {"name": name, "in": "query", "required": False, "description": description}
        if _structured(prop):
            param["content"] = {JSON: {"schema": prop}}
        else:
            param["schema"] = prop
        params.append(param)
    return params


def _structured(prop: dict) -> bool:
    kinds = [prop.get("type")] + [option.get("type") for option in prop.get("anyOf", [])]
    return any(kind in ("object", "array") for kind in kinds)


def _what_every_route_does(schema: dict, require_api_key: bool) -> None:
    """The ASGI layer's part of every operation: X-Request-Id in and out, 422 for a bad one, 429 on
    limited routes, 401 on every route but health and readiness when the API key is required, and
    where a body is taken, its size cap, deadline and memory budget (413, 408, 503)."""
    for path, operations in schema.get("paths", {}).items():
        for operation in operations.values():
            operation.setdefault("parameters", []).append(_REQUEST_ID)
            statuses = [422] + ([] if path in _UNLIMITED else [429]) + \
                ([401] if require_api_key and path not in _OPEN else []) + \
                ([408, 413, 503] if "requestBody" in operation else [])
            responses = operation.setdefault("responses", {})
            for status in statuses:
                responses.setdefault(str(status), {"description": _ERROR_STATUSES[status],
                                                   "content": {JSON: {"schema": {"$ref": _REF.format(
                                                       model="ErrorResponse")}}}})
            for response in responses.values():
                response.setdefault("headers", {})["X-Request-Id"] = _REQUEST_ID_OUT


def install(app: FastAPI, require_api_key: bool = False) -> None:
    """Generate the schema once, with the request models in components."""

    def openapi() -> dict:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, description=app.description,
                                 routes=app.routes)
            models = [*REQUEST_MODELS.values(), ErrorResponse]
            _, defs = models_json_schema([(m, "validation") for m in models], ref_template=_REF)
            schema.setdefault("components", {}).setdefault("schemas", {}).update(defs.get("$defs", {}))
            _what_every_route_does(schema, require_api_key)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi
