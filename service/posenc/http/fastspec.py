"""The commonest computed requests parsed by hand: spec rows (sinusoidal, RoPE) and table-row batches.

What a business service sends again and again is POST /v1/sinusoidal or /v1/rope/cos_sin with
`{"spec": {...}, "positions": [ints], "dtype": ...}` as JSON, or raw int64 positions with the spec
(and dtype) in the query, and POST /v1/tables/{name}/rows with `{"positions": [ints], "dtype": ...}`
or raw int64 positions (dtype, if any, in the query). For those, even the endpoint's own request
plumbing (Starlette's request, the pydantic model, the Response object) costs several times the
answer. Here the few fields are checked by hand, and only in the plainest form: keys among those,
`spec` an object, positions a list of plain integers (or a raw int64 body), `dtype` one of the
output dtypes spelled exactly, no other field, query or body form. The rest is the endpoint's own
code: the spec from the same cache and builder, the same position checks (`as_array`,
`as_positions`), the same table-or-kernel job (`spec_job`) or table gather and dtype check
(`dtype_for`), the same encoder, the response's bytes held in the worker's MemoryBudget as
`calls.respond` holds them, the metric counted once answered. A request in any other shape, any
exception (a budget that cannot hold the answer included), a job too big to run on the event loop,
or an answer that the endpoint would treat specially (over the response-size cap, large enough to
stream, or JSON to gzip for a client that accepts it) returns None and goes to the endpoint
(fastcompute), so its error or encoding, if any, is the endpoint's.
"""

from __future__ import annotations

from functools import lru_cache
from urllib.parse import parse_qsl

import numpy as np
import orjson

from ..args import as_positions
from ..dtypes import OUTPUT_DTYPES
from .calls import as_array, cost_ns
from .budget import Reservation
from .codecs import JSON, RAW, decode_array, media_type, negotiate
from .responses import GZIP_MIN_BYTES, accepts_gzip, encoded_whole, reserve_response
from .routes.encodings import rope_plan, rope_spec_of, sinusoidal_plan, sinusoidal_spec_of, spec_job
from .routes.rows import dtype_for
from .service import INLINE_BUDGET_NS
from .spec_cache import cached

_INT64 = np.dtype("<i8")
ROWS = "/v1/tables/{name}/rows"


def _sinusoidal(spec_doc, dtype):
    return sinusoidal_plan(cached(sinusoidal_spec_of, spec_doc), dtype)


def _rope(spec_doc, dtype):
    return rope_plan(cached(rope_spec_of, spec_doc), None, dtype)


#: Route -> (plan builder from the spec's JSON and the dtype).
PLANS = {"/v1/sinusoidal": _sinusoidal, "/v1/rope/cos_sin": _rope}
#: The fields a plain request may carry: (in a JSON body, in the query of a binary body).
_SPEC_FIELDS = (frozenset({"spec", "positions", "dtype"}), frozenset({"spec", "dtype"}))
_ROWS_FIELDS = (frozenset({"positions", "dtype"}), frozenset({"dtype"}))


def _query_pairs(query: bytes) -> tuple[tuple[str, str], ...]:
    return tuple(parse_qsl(query.decode("latin-1"), keep_blank_values=True, strict_parsing=True))


#: Parsing a query costs ~8 us (unquoting a spec's JSON); a client sends the same one again and again.
_cached_query_pairs = lru_cache(maxsize=1024)(_query_pairs)
MAX_CACHED_QUERY = 2048  # longer queries are parsed each time (the cache holds at most 2 MiB of them)


def _fields(scope, body: bytes, fields: tuple[frozenset, frozenset]) -> tuple[dict, object, str, bool] | None:
    """(the other fields, positions, response media, gzip?) of a plain request, or None for any other shape.
    A spec, when given, is a JSON object; a dtype one of the output dtypes' names."""
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
        if type(doc) is not dict or not doc.keys() <= fields[0]:
            return None
        positions = doc.get("positions")
        if type(positions) is not list or not all(type(p) is int for p in positions):
            return None
    elif content == RAW:
        doc = dict((_cached_query_pairs if len(query) <= MAX_CACHED_QUERY else _query_pairs)(query)) if query else {}
        if not doc.keys() <= fields[1] or (query and len(doc) != query.count(b"&") + 1):
            return None
        if "spec" in doc:
            if doc["spec"][:1] != "{":
                return None
            doc["spec"] = orjson.loads(doc["spec"])
        positions = decode_array(body, RAW, "positions", _INT64)
    else:
        return None
    dtype = doc.get("dtype")
    if ("spec" in doc and type(doc["spec"]) is not dict) or (
            dtype is not None and (type(dtype) is not str or dtype not in OUTPUT_DTYPES)):
        return None
    media = negotiate(accept)
    return doc, positions, media, media == JSON and accepts_gzip(accept_encoding)


def _spec_job(service, build, doc: dict, positions):
    """(job, elements, gathered) of a spec route's request (None when it has no spec: the endpoint decides)."""
    if "spec" not in doc:
        return None
    dtype = OUTPUT_DTYPES.get(doc.get("dtype", "float32"))  # a JSON null is not a dtype here
    if dtype is None:
        return None
    key, compute, width = build(doc["spec"], dtype)
    exact = as_positions(as_array(positions, "positions", service.config.limits.max_positions))
    return spec_job(service, key, exact, dtype, compute, width)


def _rows_job(service, name: str, doc: dict, positions):
    """(job, elements, gathered) of a request for rows of table `name` (what the rows endpoint runs)."""
    table = service.tables.get(name)
    if table is None:
        return None
    dtype = dtype_for(table, doc.get("dtype"))
    exact = as_array(positions, "positions", service.config.limits.max_positions)
    return (lambda: table.spec.cast_rows(table.lookup(exact), exact, dtype)), exact.size * table.spec.width, True


def answer(service, scope, body: bytes, route: tuple[str, tuple]) -> tuple[object, dict[str, str], Reservation] | None:
    """(body, headers, the response's reservation) of the 200 for a plain request to a PLANS route or the
    rows route (`route` from fastcompute.route_of), else None (the endpoint decides). The reservation
    holds the response's bytes in the worker's MemoryBudget, as the endpoint's would, until released
    once the body is sent."""
    template, args = route
    build = PLANS.get(template)
    if build is None and template != ROWS:
        return None
    reservation = None
    try:
        fields = _fields(scope, body, _ROWS_FIELDS if build is None else _SPEC_FIELDS)
        if fields is None:
            return None
        doc, positions, media, gzip = fields
        planned = _rows_job(service, args[0], doc, positions) if build is None else \
            _spec_job(service, build, doc, positions)
        if planned is None:
            return None
        job, elements, gathered = planned
        if cost_ns(elements, gathered, media) > INLINE_BUDGET_NS:
            return None  # a worker-thread job: the endpoint runs it (its overhead is small beside it)
        limit = service.config.limits.max_output_bytes
        reservation = reserve_response(service.budget, elements, limit)
        arr = job()
        out = encoded_whole(arr, media, limit)
        if out is None or (gzip and len(out[0]) >= GZIP_MIN_BYTES):
            raise _Unplain  # the endpoint streams or compresses it
        reservation.resize(arr.nbytes + len(out[0]))
    except Exception:  # noqa: BLE001 - the endpoint (then FastAPI) answers it, error and all
        if reservation is not None:
            reservation.release()
        return None
    service.metrics.table(hit=gathered)
    return out[0], out[1], reservation


class _Unplain(Exception):
    """A computed answer the endpoint treats specially (streamed, compressed): it answers again."""
