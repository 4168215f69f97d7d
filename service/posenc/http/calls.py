"""From a request to validated parameters and arrays, and from an array to a response.

A request is either a JSON object (every field in it) or a binary body holding the one
array the route takes (`.npy`, or raw little-endian values), with the other fields as
query parameters; query values starting with `{` or `[` are JSON. Query parameters may
also accompany a JSON body, but a field may not be given in both.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
from fastapi import Request
from fastapi.responses import Response
from pydantic import BaseModel, ValidationError

from ..errors import PosencError
from .codecs import JSON, NPY, RAW, decode_array, decode_json, encode, media_type, negotiate
from .errors import HttpError
from .service import Service

#: Fields that carry arrays: parsed straight to numpy (never through pydantic).
ARRAY_FIELDS = ("positions", "x", "relative_position")
#: Array fields whose length is capped by `limits.max_positions`.
COUNTED_FIELDS = ("positions", "relative_position")
_RAW_DTYPES = {"int64": np.dtype(np.int64), "float64": np.dtype(np.float64)}


@dataclass
class Call:
    params: Any  # the route's pydantic model
    media: str  # response media type
    arrays: dict[str, Any] = field(default_factory=dict)  # ndarray from a binary body, JSON values otherwise


def service_of(request: Request) -> Service:
    return request.app.state.service


def _query(request: Request) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if not request.scope["query_string"]:  # the usual case; parsing nothing still costs microseconds
        return out
    for key, value in request.query_params.multi_items():
        if key in out:
            raise HttpError("invalid_parameter", f"query parameter {key!r} is given more than once", key)
        if value[:1] in ("{", "["):
            try:
                value = orjson.loads(value)
            except orjson.JSONDecodeError as exc:
                raise HttpError("invalid_parameter", f"{key}: not valid JSON ({exc})", key) from None
        out[key] = value
    return out


def validate(model: type[BaseModel], doc: dict) -> BaseModel:
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or None
        raise HttpError("invalid_parameter", f"{where}: {first['msg']}", where) from None


async def read_call(request: Request, model: type[BaseModel], body_array: str | None) -> Call:
    """Parse the request for a route whose binary body (if it accepts one) is `body_array`."""
    media = negotiate(request.headers.get("accept"))
    content = media_type(request.headers.get("content-type"))
    body = await request.body()
    query = _query(request)
    arrays: dict[str, Any] = {}
    if content == JSON:
        doc = decode_json(body)
        arrays = {name: doc.pop(name) for name in ARRAY_FIELDS if name in doc}
        twice = sorted(set(doc) & set(query))
        if twice:
            raise HttpError("invalid_parameter", f"{twice[0]} is given in both the body and the query", twice[0])
        doc.update(query)
    elif content in (NPY, RAW) and body_array is not None:
        doc = query
        raw_dtype = _RAW_DTYPES.get(doc.get("positions_dtype", "int64"))
        if raw_dtype is None:
            raise HttpError("invalid_parameter", f"positions_dtype must be one of {sorted(_RAW_DTYPES)}",
                            "positions_dtype")
        arrays[body_array] = decode_array(body, content, body_array, raw_dtype)
    else:
        accepted = [JSON] + ([NPY, RAW] if body_array else [])
        raise HttpError("unsupported_media_type", f"Content-Type {content!r}: send one of {accepted}",
                        "content-type")
    params = validate(model, doc)
    limit = service_of(request).config.limits.max_positions
    for name in COUNTED_FIELDS:
        if name in arrays:
            arrays[name] = as_array(arrays[name], name, limit)
    return Call(params, media, arrays)


def as_array(value, name: str, limit: int, dtype=None) -> np.ndarray:
    """A JSON value (or decoded body) as an ndarray of at most `limit` elements."""
    if isinstance(value, list) and len(value) > limit:
        raise HttpError("too_many_positions", f"{len(value)} {name} is over the limit of {limit}", name)
    try:
        arr = np.asarray(value, dtype=dtype)
    except (TypeError, ValueError, OverflowError) as exc:
        raise PosencError(name, f"must be an array of numbers ({exc})") from None
    if arr.size > limit:
        raise HttpError("too_many_positions", f"{arr.size} {name} is over the limit of {limit}", name)
    return arr


#: Rough per-element costs on one core of the dev machine, to decide what may run on the event loop.
GATHER_NS = 0.5  # copying table rows out of shared memory
COMPUTE_NS = 5.0  # computing encodings with the kernels
ENCODE_NS = {JSON: 30.0, NPY: 0.3, RAW: 0.3}  # orjson formats ~30 ns a float; binary is one copy


def cost_ns(elements: int, gathered: bool, media: str) -> float:
    """The estimated cost of answering `elements` values in `media` (Service.run decides where it runs)."""
    return elements * ((GATHER_NS if gathered else COMPUTE_NS) + ENCODE_NS[media])


async def respond(request: Request, media: str, job: Callable[[], np.ndarray], elements: int,
                  gathered: bool = False, extra: dict | None = None) -> Response:
    """Run `job` (in a thread when its estimated cost is high), encode its array in `media`, answer 200."""
    def work():
        return encode(job(), media, extra)

    body, headers = await service_of(request).run(work, cost_ns(elements, gathered, media))
    return Response(body, headers=headers)


@contextmanager
def fields_under(prefix: str):
    """Report library errors about a nested object with their path (dim -> spec.dim)."""
    try:
        yield
    except PosencError as exc:
        raise PosencError(f"{prefix}.{exc.field}", exc.message) from None

