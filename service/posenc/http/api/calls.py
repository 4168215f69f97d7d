"""From a request to validated parameters and arrays, and from an array to a response.

A request's body is either a JSON object or a binary body holding the one array the route
takes (`.npy`, or raw little-endian values). Fields may go in the query string too, with
either body (the OpenAPI document lists them as the query parameters of the routes that take
binary bodies), each field in one place: one in both the query and a JSON body is a 422. A
null is a field not given. Types are strict: a JSON `true` is not the number 1, `"yes"` is not
a boolean, `4.5` is not an integer. Query values are text, read as JSON (`8`, `true`, `{"dim": 64}`) for fields that are
not strings.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

import numpy as np
import orjson
from fastapi import Request
from fastapi.responses import Response
from pydantic import BaseModel, ValidationError

from ...errors import PosencError
from .codecs import JSON, NPY, RAW, decode_array, decode_json, media_type, negotiate
from .errors import HttpError
from .schemas import _Strict
from .responses import GZIP_MIN_BYTES, ArrayResponse, accepts_gzip, encoded_whole, gzipped, reserve_response
from ..runtime.service import Service

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


def _takes_text(annotation) -> bool:
    """Whether a field's type admits a plain string (then its query value is not read as JSON)."""
    if annotation is str:
        return True
    args = get_args(annotation)
    if get_origin(annotation) is Literal:
        return any(isinstance(a, str) for a in args)
    return get_origin(annotation) in (Union, UnionType) and any(_takes_text(a) for a in args)


def _query(request: Request, model: type[BaseModel]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if not request.scope["query_string"]:  # the usual case; parsing nothing still costs microseconds
        return out
    fields = model.model_fields
    for key, value in request.query_params.multi_items():
        if key in out:
            raise HttpError("invalid_parameter", f"query parameter {key!r} is given more than once", key)
        if key in fields and (value[:1] in ("{", "[") or not _takes_text(fields[key].annotation)):
            try:
                value = orjson.loads(value)
            except orjson.JSONDecodeError:
                if value[:1] in ("{", "["):
                    raise HttpError("invalid_parameter", f"{key}: not valid JSON", key) from None
        out[key] = value
    return out


def validate(model: type[BaseModel], doc: dict) -> BaseModel:
    try:
        return model.model_validate(doc, strict=True)
    except ValidationError as exc:
        first = exc.errors()[0]
        # request models are flat: the first loc part is the field (the rest are union-member tags)
        where = str(first["loc"][0]) if first["loc"] else None
        raise HttpError("invalid_parameter", f"{where}: {first['msg']}", where) from None


async def read_call(request: Request, model: type[_Strict]) -> Call:
    """Parse the request for a route taking `model`; a binary body is its REQUIRED_ARRAY (routes
    without one take JSON only)."""
    body_array = model.REQUIRED_ARRAY
    media = negotiate(request.headers.get("accept"))
    content = media_type(request.headers.get("content-type"))
    body = await request.body()
    query = _query(request, model)
    arrays: dict[str, Any] = {}
    if content == JSON:
        doc = decode_json(body)
        both = min(doc.keys() & query.keys(), default=None)
        if both is not None:
            raise HttpError("invalid_parameter", f"{both}: given in both the query and the body (give it once)",
                            both)
        doc.update(query)
        arrays = {name: value for name in ARRAY_FIELDS if (value := doc.pop(name, None)) is not None}
        refuse_booleans(arrays, body, request.scope["query_string"])
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
    if model.REQUIRED_ARRAY is not None and model.REQUIRED_ARRAY not in arrays:
        raise PosencError(model.REQUIRED_ARRAY, "is required")
    limit = service_of(request).config.limits.max_positions
    for name in COUNTED_FIELDS:
        if name in arrays:
            arrays[name] = as_array(arrays[name], name, limit)
    return Call(params, media, arrays)


def _leaf_types(value) -> set[type]:
    """The types of the leaves of a nested JSON list."""
    if type(value) is not list:
        return {type(value)}
    if value and type(value[0]) is list:
        return set().union(*map(_leaf_types, value))
    return set(map(type, value))


def refuse_booleans(arrays: dict[str, Any], *texts: bytes) -> None:
    """A JSON true/false in an array field is not a number (numpy would make [0, true] [0, 1]).
    `texts`: where the arrays were read from (a scan of each rules out the usual case)."""
    if any(b"true" in text or b"false" in text for text in texts):
        for name, value in arrays.items():
            if bool in _leaf_types(value):
                raise PosencError(name, "must hold numbers only, got true/false")


def as_array(value, name: str, limit: int, dtype=None) -> np.ndarray:
    """A JSON value (or decoded body) as an ndarray of at most `limit` elements; with `dtype`,
    numbers only (no strings, no nulls), each finite in that dtype."""
    if isinstance(value, list) and len(value) > limit:
        raise HttpError("too_many_positions", f"{len(value)} {name} is over the limit of {limit}", name)
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError, OverflowError) as exc:
        raise PosencError(name, f"must be an array of numbers ({exc})") from None
    if arr.size > limit:
        raise HttpError("too_many_positions", f"{arr.size} {name} is over the limit of {limit}", name)
    if dtype is not None:
        if arr.dtype.kind not in "iuf":
            raise PosencError(name, f"must be an array of numbers, got {arr.dtype} values")
        with np.errstate(over="ignore"):
            cast = arr.astype(dtype)
        if not np.isfinite(cast).all():  # JSON has no inf or NaN: a number too large for `dtype`
            raise PosencError(name, f"holds a number too large for {np.dtype(dtype).name}")
        arr = cast
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
    """Run `job` (in a thread when its estimated cost is high) and answer 200 with its array in `media`.

    Before computing, the array's upper bound (`elements` of at most 8 bytes, within the output
    cap) is charged to the worker's MemoryBudget; then its real size, until the last byte is sent.
    Small bodies are encoded with the job; large ones are streamed by ArrayResponse."""
    service = service_of(request)
    limit = service.config.limits.max_output_bytes
    gzip = media == JSON and accepts_gzip(request.headers.get("accept-encoding"))

    def work():
        arr = job()
        whole = encoded_whole(arr, media, limit, extra)
        if whole is None:
            return arr, None, gzip
        body = whole[0]
        if gzip and len(body) >= GZIP_MIN_BYTES:
            return arr, gzipped(body), True
        return arr, body, False

    reservation = reserve_response(service.budget, elements, limit)
    try:
        arr, body, zipped = await service.run(work, cost_ns(elements, gathered, media))
        reservation.resize(arr.nbytes + (0 if body is None else len(body)))
    except BaseException:
        reservation.release()
        raise
    return ArrayResponse(arr, media, extra, zipped, reservation, service.in_thread, body)


@contextmanager
def fields_under(prefix: str):
    """Report library errors about a nested object with their path (dim -> spec.dim). The library
    names the keys of a config.json `config.<key>`; under `hf_config` that is `hf_config.<key>`."""
    try:
        yield
    except PosencError as exc:
        inner = exc.field.removeprefix("config.") if prefix == "hf_config" and exc.field != "config" else exc.field
        raise PosencError(prefix if inner == "config" else f"{prefix}.{inner}", exc.message) from None

