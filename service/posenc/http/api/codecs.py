"""Arrays on the wire: content negotiation, response encoding and binary request bodies.

Responses (chosen by the Accept header; JSON when absent or `*/*`):
  * application/json          {"dtype": "float32", "shape": [n, d], "data": [[...], ...]}
                              (NaN and +-inf, e.g. ALiBi's masked -inf, become null; float32 numbers
                              are the shortest decimal that reads back as the same float32, printed
                              by libposenc exactly as orjson prints them: json_data)
  * application/x-npy         a .npy file (format 1.0); bfloat16 has no npy type (422)
  * application/octet-stream  the raw little-endian C-order bytes
Binary responses also carry `X-Posenc-Dtype` (e.g. "float32", "bfloat16") and
`X-Posenc-Shape` (comma-separated, e.g. "3,128").

Request bodies: JSON objects, or a single array as .npy or raw little-endian bytes
(raw: int64 unless the request says otherwise), the other parameters then in the query.
"""

from __future__ import annotations

import io

import ml_dtypes
import numpy as np
import orjson

from ...args import json_type
from ...native.json_text import available as native_json_available
from ...native.json_text import json_f32, json_f32_checked
from ...native.json_text import writer as native_json_writer
from ...npyfile import parse_npy
from .errors import HttpError

JSON = "application/json"
NPY = "application/x-npy"
RAW = "application/octet-stream"
#: Header values longer than this are parsed each time, not cached: a cache keyed by what clients
#: send must not hold 64 KiB values (max_head_bytes) hundreds of times over.
CACHED_HEADER_CHARS = 256
MEDIA_TYPES = (JSON, NPY, RAW)
_WILDCARDS = ("*/*", "application/*")
_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
_FLOAT32 = np.dtype(np.float32)
#: Printed as the float32 they widen to exactly (orjson prints float16 so too).
_WIDENED = (_BFLOAT16, np.dtype(np.float16))
#: The vector writers print float32 JSON natively (AVX-512 3x orjson's speed, AVX2 2.5x: README,
#: `posenc bench json`); the scalar writer prints the same bytes no faster than orjson, so where neither
#: runs (or POSENC_ISA=scalar) orjson keeps printing them.
VECTOR_WRITERS = {"avx512": "AVX-512", "avx2": "AVX2"}
NATIVE_JSON = native_json_available() and native_json_writer() in VECTOR_WRITERS


def json_printer() -> str:
    """Which printer json_data uses for float32 here, in words (for reports)."""
    return f"libposenc's {VECTOR_WRITERS[native_json_writer()]} writer" if NATIVE_JSON else "orjson"


def _negotiate_uncached(accept: str | None) -> str:
    """The response media type for an Accept header (q-values honoured, ties in listed order)."""
    if not accept:
        return JSON
    offers = []
    for index, item in enumerate(accept.split(",")):
        media, *params = (part.strip() for part in item.split(";"))
        quality = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        if quality > 0:
            offers.append((-quality, index, media.lower()))
    for _, _, media in sorted(offers):
        if media in MEDIA_TYPES:
            return media
        if media in _WILDCARDS:
            return JSON
    raise HttpError("not_acceptable", f"Accept {accept!r}: this service returns one of {list(MEDIA_TYPES)}",
                    "accept")


class _HeaderCache(dict):
    """header value -> function(value), for the values up to CACHED_HEADER_CHARS long, at most
    `maxsize` of them (the oldest let go first); what header_cache hands out is its `__getitem__`."""

    __slots__ = ("function", "maxsize")

    def __init__(self, function, maxsize: int):
        super().__init__()
        self.function = function
        self.maxsize = maxsize

    def __missing__(self, value):
        result = self.function(value)  # raises for a value the function refuses: nothing kept
        if value is None or len(value) <= CACHED_HEADER_CHARS:
            if len(self) >= self.maxsize:
                del self[next(iter(self))]
            self[value] = result
        return result


def header_cache(maxsize: int):
    """A cache for a function of one header value, keeping only values up to CACHED_HEADER_CHARS
    long (what clients send again and again); a longer one (up to max_head_bytes) is worked out
    each time, so the cache stays under maxsize x ~300 B whatever clients send. The cached function
    is a dict's `__getitem__` (its `__self__` is the dict): a value seen before costs no Python
    frame at all, where lru_cache behind a length check cost two (these run on every request)."""
    def wrap(function):
        return _HeaderCache(function, maxsize).__getitem__

    return wrap


negotiate = header_cache(256)(_negotiate_uncached)


def media_type(content_type: str | None) -> str:
    """The bare media type of a Content-Type header (JSON when absent)."""
    if not content_type:
        return JSON
    return content_type.split(";", 1)[0].strip().lower()


_DTYPE_NAMES: dict[np.dtype, str] = {}


def dtype_name(dtype: np.dtype) -> str:
    """"float32", "bfloat16", ... (cached: `np.dtype.name` costs ~7 us, a third of a fast request)."""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = "bfloat16" if dtype == _BFLOAT16 else dtype.name
    return name


def encode(arr: np.ndarray, media: str, extra: dict | None = None) -> tuple[bytes, dict[str, str]]:
    """(body, headers) for `arr` in `media`; `extra` adds top-level JSON keys (binary: X-Posenc-* headers)."""
    headers = headers_for(arr, media, extra)
    body = body_of(arr, media, extra)
    return (bytes(body) if media == RAW else body), headers  # a raw body's bytes in C order, copied


def encode_body(arr: np.ndarray, media: str, extra: dict | None = None) -> tuple[bytes | memoryview, dict[str, str]]:
    """`encode`, except that a raw body is a view of the array's own bytes, not a copy of them (a
    1024-row batch is 512 KiB: the copy cost as much as the gather). The view keeps the array alive
    until the server has written it. (The ASGI spec says a body is bytes; uvicorn's httptools and h11
    protocols, which `posenc serve` runs, and Starlette's test client write any bytes-like object.)"""
    headers = headers_for(arr, media, extra)  # first: it refuses what `media` cannot carry
    return body_of(arr, media, extra), headers


def body_of(arr: np.ndarray, media: str, extra: dict | None = None) -> bytes | memoryview:
    """The body alone of `encode_body` (a raw body a view of the array's bytes), for callers that
    made the headers once (after headers_for accepted `arr`'s dtype and `media`)."""
    if media == JSON:
        head, tail = json_frame(arr, extra)
        return b"".join((head, json_data(arr), tail))  # one copy of the text, not two
    arr = wire_array(arr)
    if media == RAW:
        return memoryview(arr.reshape(-1).view(np.uint8))  # C order whatever the strides
    return npy_header(arr) + arr.tobytes()


def headers_for(arr: np.ndarray, media: str, extra: dict | None = None) -> dict[str, str]:
    if media == JSON:
        return {"content-type": JSON}
    name = dtype_name(arr.dtype)
    if media == NPY and name == "bfloat16":
        raise HttpError("invalid_parameter", "bfloat16 has no .npy type; ask for application/octet-stream",
                        "dtype")
    headers = {"content-type": media, "x-posenc-dtype": name, "x-posenc-shape": ",".join(map(str, arr.shape))}
    for key, value in (extra or {}).items():
        headers[f"x-posenc-{key.replace('_', '-')}"] = repr(value)
    return headers


def json_frame(arr: np.ndarray, extra: dict | None = None) -> tuple[bytes, bytes]:
    """The JSON document around `data`: b'{"dtype":..,"shape":..,"data":' and b'}' (extra keys before it)."""
    head = orjson.dumps({"dtype": dtype_name(arr.dtype), "shape": arr.shape})[:-1] + b',"data":'
    return head, (b"," + orjson.dumps(extra)[1:]) if extra else b"}"


def json_data(arr: np.ndarray) -> bytes:
    """`arr` as nested JSON lists (a 0-d array as its one number). float32, and float16 and bfloat16
    widened to float32, are printed by libposenc's AVX-512 or AVX2 writer where one runs
    (posenc.native.json_text: the bytes orjson prints, 2.5-3x faster); other dtypes, and every dtype
    elsewhere, by orjson."""
    if arr.dtype is _FLOAT32 and NATIVE_JSON and type(arr) is np.ndarray and arr.flags.c_contiguous:
        return json_f32_checked(arr)  # the hot path: a table row or a computed float32 answer
    if arr.dtype in _WIDENED:
        arr = arr.astype(np.float32)
    elif not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr)
    if arr.dtype == _FLOAT32 and NATIVE_JSON:
        return json_f32(arr)
    if arr.ndim == 0:
        return orjson.dumps(arr.reshape(1), option=orjson.OPT_SERIALIZE_NUMPY)[1:-1]
    return orjson.dumps(arr, option=orjson.OPT_SERIALIZE_NUMPY)


def wire_array(arr: np.ndarray) -> np.ndarray:
    """`arr` as C-contiguous little-endian, the byte layout of binary bodies."""
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    return np.ascontiguousarray(arr)


def npy_header(arr: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        out, {"descr": np.lib.format.dtype_to_descr(arr.dtype), "fortran_order": False, "shape": arr.shape})
    return out.getvalue()


def decode_json(body: bytes) -> dict:
    """A JSON object body (an empty body is an empty object)."""
    if not body.strip():
        return {}
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise HttpError("invalid_body", f"body is not valid JSON: {exc}", "body") from None
    if not isinstance(doc, dict):
        raise HttpError("invalid_body", f"body must be a JSON object, got {json_type(doc)}", "body")
    return doc


def decode_array(body: bytes, media: str, field: str, raw_dtype: np.dtype) -> np.ndarray:
    """The array in a binary body: .npy (any shape) or raw little-endian `raw_dtype` (1-D)."""
    if media == NPY:
        return _read_npy(body, field)
    if len(body) % raw_dtype.itemsize:
        raise HttpError("invalid_body", f"{len(body)} bytes is not a whole number of {raw_dtype.name} values",
                        field)
    return np.frombuffer(body, dtype=raw_dtype.newbyteorder("<"))


def _read_npy(body: bytes, field: str) -> np.ndarray:
    """Parse a .npy body without trusting it (npyfile.parse_npy); numeric dtypes only."""
    try:
        arr = parse_npy(body, "body")
    except ValueError as exc:
        raise HttpError("invalid_body", str(exc), field) from None
    if arr.dtype.kind not in "iuf":
        raise HttpError("invalid_body", f".npy dtype must be numeric, got {arr.dtype}", field)
    return arr if arr.dtype.isnative else arr.astype(arr.dtype.newbyteorder("="))
