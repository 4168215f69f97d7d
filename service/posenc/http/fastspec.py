"""The commonest computed requests parsed by hand: a spec and integer positions, for sinusoidal or RoPE rows.

What a business service sends again and again is POST /v1/sinusoidal or /v1/rope/cos_sin with
`{"spec": {...}, "positions": [ints], "dtype": ...}` as JSON, or raw int64 positions with the spec
(and dtype) in the query. For those, even the endpoint's own request plumbing (Starlette's
request, the pydantic model, the Response object) costs several times the answer. Here the few
fields are checked by hand, and only in the plainest form: keys among those, `spec` an object,
positions a list of plain integers (or a raw int64 body), `dtype` one of the output dtypes
spelled exactly, no other field, query or body form. The rest is the endpoint's own code: the
spec from the same cache and builder, the same position checks (`as_array`, `as_positions`), the
same table-or-kernel job (`spec_job`), the same encoder, the metric counted once answered. A request
in any other shape, any exception, a job too big to run on the event loop, or an answer that the
endpoint would treat specially (over the response-size cap, large enough to stream, or JSON to
gzip for a client that accepts it) returns None and goes to the endpoint (fastcompute), so its
error or encoding, if any, is the endpoint's.
"""

from __future__ import annotations

from urllib.parse import parse_qsl

import numpy as np
import orjson

from ..args import as_positions
from ..dtypes import OUTPUT_DTYPES
from .calls import as_array, cost_ns
from .codecs import JSON, RAW, decode_array, encode, media_type, negotiate
from .responses import GZIP_MIN_BYTES, STREAM_BYTES, accepts_gzip, check_response_size, encoded_size_bound
from .routes.encodings import rope_plan, rope_spec_of, sinusoidal_plan, sinusoidal_spec_of, spec_job
from .service import INLINE_BUDGET_NS
from .spec_cache import cached

_JSON_KEYS = frozenset({"spec", "positions", "dtype"})
_QUERY_KEYS = frozenset({"spec", "dtype"})
_INT64 = np.dtype("<i8")


def _sinusoidal(spec_doc, dtype):
    return sinusoidal_plan(cached(sinusoidal_spec_of, spec_doc), dtype)


def _rope(spec_doc, dtype):
    return rope_plan(cached(rope_spec_of, spec_doc), None, dtype)


#: Route -> (plan builder from the spec's JSON and the dtype).
PLANS = {"/v1/sinusoidal": _sinusoidal, "/v1/rope/cos_sin": _rope}


def _fields(scope, body: bytes) -> tuple[dict, object] | None:
    """(spec JSON, positions) and the dtype name of a plain request, or None for any other shape."""
    content_type = accept = accept_encoding = None
    for key, value in scope["headers"]:
        if key == b"content-type" and content_type is None:
            content_type = value.decode("latin-1")
        elif key == b"accept" and accept is None:
            accept = value.decode("latin-1")
        elif key == b"accept-encoding" and accept_encoding is None:
            accept_encoding = value.decode("latin-1")
    content = media_type(content_type)
    query = scope["query_string"]
    if content == JSON and not query:
        doc = orjson.loads(body)
        if type(doc) is not dict or not doc.keys() <= _JSON_KEYS:
            return None
        positions = doc.get("positions")
        if type(positions) is not list or not all(type(p) is int for p in positions):
            return None
    elif content == RAW:
        doc = dict(parse_qsl(query.decode("latin-1"), keep_blank_values=True, strict_parsing=True))
        if not doc.keys() <= _QUERY_KEYS or len(doc) != query.count(b"&") + 1 or doc.get("spec", "")[:1] != "{":
            return None
        doc["spec"] = orjson.loads(doc["spec"])
        positions = decode_array(body, RAW, "positions", _INT64)
    else:
        return None
    dtype = doc.get("dtype", "float32")
    if type(doc.get("spec")) is not dict or type(dtype) is not str or dtype not in OUTPUT_DTYPES:
        return None
    media = negotiate(accept)
    return (doc["spec"], positions, OUTPUT_DTYPES[dtype]), media, media == JSON and accepts_gzip(accept_encoding)


def answer(service, scope, body: bytes) -> tuple[bytes, dict[str, str]] | None:
    """(body, headers) of the 200 for a plain spec request to a PLANS route, else None (the endpoint decides)."""
    build = PLANS.get(scope["path"])
    if build is None:
        return None
    try:
        fields = _fields(scope, body)
        if fields is None:
            return None
        (spec_doc, positions, dtype), media, gzip = fields
        key, compute, width = build(spec_doc, dtype)
        exact = as_positions(as_array(positions, "positions", service.config.limits.max_positions))
        job, elements, gathered = spec_job(service, key, exact, dtype, compute, width)
        if cost_ns(elements, gathered, media) > INLINE_BUDGET_NS:
            return None  # a worker-thread job: the endpoint runs it (its overhead is small beside it)
        arr = job()
        check_response_size(arr, media, service.config.limits.max_output_bytes)
        if encoded_size_bound(arr, media) > STREAM_BYTES:
            return None  # the endpoint streams it
        out = encode(arr, media)
        if gzip and len(out[0]) >= GZIP_MIN_BYTES:
            return None  # the endpoint compresses it
    except Exception:  # noqa: BLE001 - the endpoint (then FastAPI) answers it, error and all
        return None
    service.metrics.table(hit=gathered)
    return out
