"""The commonest computed requests, answered from a prepared plan before any other layer.

What a business service sends again and again is one request shape with the same spec, dtype
and headers each time and new positions:
  * POST /v1/sinusoidal or /v1/rope/cos_sin: JSON `{"spec": {...}, "positions": [ints], "dtype": ..}`,
    or raw int64 positions with `spec` (and `dtype`) in the query;
  * POST /v1/tables/{name}/rows: JSON `{"positions": [ints], "dtype": ..}`, or raw int64 positions
    (`dtype`, if any, in the query).
Everything about such a request but its positions -- the spec (validated by the same builder and
spec cache the endpoint uses), the tables that could stand in for it, the output dtype, the
response's media type and header bytes -- is worked out once, the first time its shape is seen,
into a `Plan` kept under the request's key (route, query or spec JSON, dtype, Accept,
Accept-Encoding). A request then costs one pass over its headers, a dict lookup, its positions
checked as the endpoint checks them (how many, integers, |p| <= max_abs_position), its rows
gathered from a covering table (a view of the shared-memory mapping for one position) or
computed by the endpoint's own kernel function, and the bytes encoded by the same codec.

The plans apply no rule: the pipeline (asgi.py) has applied the request id, API key, CORS, body
limit, memory budget (the request body) and concurrency limit before the router (plans.py) asks
`Prepared.answer`; the answer holds only its own bytes (the rows and their encoding) in the
worker's MemoryBudget until sent (`Answer.done`). Anything else -- another shape, a shape whose plan
cannot be built (an invalid spec, a table that does not serve the dtype), positions outside a table
or not integers, a job too big for the event loop, an answer over the output cap or large enough to
stream or to gzip, a budget that cannot hold the answer, any exception -- answers nothing here: the
next plan or FastAPI gives the endpoint's answer or error. No error is made here.

Registered in the plan table (plans.py) as `prepared-spec` and `prepared-rows`, both `now` plans:
the ASGI path calls them after its rules, and posenc's HTTP protocol through the app's
`answer_now` (the same rules), to answer a request without an ASGI task at all.
"""

from __future__ import annotations

from urllib.parse import parse_qsl

import numpy as np
import orjson

from ...args import SMALL_ARRAY
from ...dtypes import BFLOAT16, OUTPUT_DTYPES
from ...kernels.active import index_span
from ...limits import LIMITS
from ..api.calls import cost_ns
from ..api.codecs import JSON, RAW, body_of, header_cache, headers_for, json_data, json_frame, media_type, negotiate
from .headers import render, text_of
from ..api.responses import GZIP_MIN_BYTES, STREAM_BYTES, accepts_gzip, size_bound
from ..api.routes.encodings import rope_plan, rope_spec_of, sinusoidal_plan, sinusoidal_spec_of
from ..api.routes.rows import dtype_for
from ..runtime.service import CACHE_SHARES, INLINE_BUDGET_NS

ROWS = "/v1/tables/{name}/rows"
_ROWS_PREFIX, _ROWS_SUFFIX = "/v1/tables/", "/rows"
_INT64 = np.dtype("<i8")
#: The longest query or spec JSON a plan is keyed by (longer ones go the general way).
MAX_KEY_BYTES = 4096


def _sinusoidal(specs, spec_doc, dtype):
    return sinusoidal_plan(specs(sinusoidal_spec_of, spec_doc), dtype)


def _rope(specs, spec_doc, dtype):
    return rope_plan(specs(rope_spec_of, spec_doc), None, dtype)


#: Spec route -> builder of (table key, compute, row width) from the worker's spec cache, the
#: spec's JSON and the dtype: the endpoint's own plan functions.
SPEC_ROUTES = {"/v1/sinusoidal": _sinusoidal, "/v1/rope/cos_sin": _rope}
#: The fields a plain request may carry: (JSON body, query of a raw body), for spec routes and rows.
_FIELDS = {True: (frozenset({"spec", "positions", "dtype"}), frozenset({"spec", "dtype"})),
           False: (frozenset({"positions", "dtype"}), frozenset({"dtype"}))}


class Plan:
    """What every request of one shape shares: where its rows come from and how they are sent."""

    __slots__ = ("bound_base", "bound_per_row", "compute", "dtype", "gzip", "head", "head_lines", "json_head", "key",
                 "media", "name", "route", "table", "width")

    def __init__(self, route: int, media: str, gzip: bool, dtype: np.dtype, width: int):
        self.route = route  # its metrics route index
        self.media, self.gzip, self.dtype, self.width = media, gzip, dtype, width
        self.key = self.compute = self.name = self.table = self.json_head = None
        # size_bound of n rows is linear in n: its two terms, so a request costs one multiply-add
        self.bound_base = size_bound((0, width), dtype, media)
        self.bound_per_row = size_bound((1, width), dtype, media) - self.bound_base
        probe = headers_for(np.empty((1, width), dtype), media)  # raises for a media the dtype has not
        self.head = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in probe.items() if k != "x-posenc-shape"]
        self.head_lines = render(self.head)

    def stale(self, service) -> bool:
        """Whether the table this plan names was replaced or removed since it was made."""
        return self.name is not None and service.tables.get(self.name) is not self.table

    def source(self, service, lo: int, hi: int):
        """The table to gather rows [lo, hi] from, None to compute them, or False when this plan
        cannot answer them (its named table does not hold them)."""
        if self.name is not None:
            table = self.table
            return table if table.start <= lo and hi < table.stop else False
        if self.key is not None:
            for table in service.tables.candidates(self.key, self.dtype):
                if table.start <= lo and hi < table.stop:
                    return table
        return None

    def rows(self, table, positions, lo: int) -> np.ndarray:
        """The rows of `positions` as the plan's dtype: gathered from `table`, else computed."""
        if table is None:
            return self.compute(np.asarray(positions, np.float64))
        array, start = table.array, table.start
        if type(positions) is list and len(positions) == 1:
            rows = array[lo - start:lo - start + 1]  # a view of the mapping, as the row route sends
        else:
            index = np.asarray(positions, np.int64)
            rows = array.take(index - start if start else index, axis=0)
        if rows.dtype != self.dtype:  # cast once from float64 values, as the endpoint does
            rows = table.spec.cast_rows(rows, np.asarray(positions, np.float64), self.dtype)
        return rows

    def body(self, arr: np.ndarray):
        """The response body, exactly as codecs.encode_body gives it (raw: a view, no copy)."""
        if self.media != JSON or arr.dtype == BFLOAT16 or len(arr) > 1:
            return body_of(arr, self.media)
        head = self.json_head  # one row: the document around its numbers is the same every time
        if head is None:
            head = self.json_head = json_frame(arr)[0]
        return head + json_data(arr) + b"}"


class Answer:
    """A plan's 200: its route index, headers (content-length included; X-Request-Id is added by
    the pipeline) and body, its bytes held in the worker's budget until `done`.

    Its headers are `shared`, what every answer of its plan carries, rendered once by the plan as a
    head's lines (`lines`, `headers.render`), then `own`, this answer's (content-length, shape): the
    protocol, which writes the head itself, renders only those and X-Request-Id (`head_lines`)."""

    __slots__ = ("headers", "held", "hit", "lines", "payload", "route", "service", "shared")

    def __init__(self, service, route: int, shared: list, lines: bytes, own: list, payload, hit: bool,
                 held: int):
        self.service, self.route, self.payload, self.hit, self.held = service, route, payload, hit, held
        self.headers = [*shared, *own]
        self.lines, self.shared = lines, len(shared)

    def head_lines(self) -> bytes:
        """The response's header lines, as `render(self.headers)` gives them."""
        return self.lines + render(self.headers[self.shared:])

    def done(self) -> None:
        """Once its body is written: its bytes given back to the budget, the table hit or miss counted."""
        if self.held:
            self.service.budget.give_back(self.held)
        self.service.metrics.table(self.hit)


class Prepared:
    """The plans of one worker, and the per-request path that uses them."""

    def __init__(self, service):
        self.service = service
        self.max_positions = service.config.limits.max_positions
        #: Larger answers are refused (max_output_bytes) or streamed: the endpoint's, either way.
        self.max_whole_bytes = min(service.config.limits.max_output_bytes, STREAM_BYTES)
        self._plans = service.cache(CACHE_SHARES["plans"])  # bounded in bytes, charged to the budget

    def answer(self, scope, body: bytes) -> Answer | None:
        """The 200 of a plain POST whose whole body is `body`, its bytes held in the worker's budget
        (`done()` gives them back once written), or None when the next plan or FastAPI must answer
        it. Runs nothing asynchronous. The pipeline's rules have run before (plans.py)."""
        path = scope["path"]
        listed = scope["headers"]
        headers = dict(listed)
        if len(headers) != len(listed):
            return None  # a repeated header: the general path decides which one counts
        try:
            found = self._answer(scope, path, path in SPEC_ROUTES, headers, body)
        except Exception:  # the general path answers it, error and all
            return None
        if found is None:
            return None
        plan, payload, shape, hit, held = found
        length = (b"content-length", b"%d" % len(payload))
        own = [length] if shape is None else [(b"x-posenc-shape", shape), length]
        return Answer(self.service, plan.route, plan.head, plan.head_lines, own, payload, hit, held)

    def _answer(self, scope, path: str, spec_route: bool, headers: dict, body: bytes):
        """(plan, body, X-Posenc-Shape value or None, table hit?, bytes held in the budget) of this
        request's 200 (its bytes then held until given back), or None when the general path must
        answer it."""
        content = _media_of(headers.get(b"content-type"))
        query = scope["query_string"]
        if content == RAW:
            if len(query) > MAX_KEY_BYTES or len(body) % 8:
                return None
            key = (path, query, headers.get(b"accept"), headers.get(b"accept-encoding"))
            positions = np.frombuffer(body, _INT64)
            n = positions.size
            if n <= SMALL_ARRAY:
                positions = positions.tolist()
                lo, hi = (min(positions), max(positions)) if n else (0, 0)
            else:
                lo, hi = index_span(positions)
        elif content == JSON and not query:
            doc = orjson.loads(body)
            if type(doc) is not dict or not doc.keys() <= _FIELDS[spec_route][0] or (spec_route and "spec" not in doc):
                return None
            positions = doc.get("positions")
            if type(positions) is not list or not all(type(p) is int for p in positions):
                return None
            # the key is the request's exact fields but its positions: a missing dtype, "" and null
            # are three requests (only the first has a plan), never one
            spec = orjson.dumps(doc["spec"]) if spec_route else None
            if spec is not None and len(spec) > MAX_KEY_BYTES:
                return None
            dtype = orjson.dumps(doc["dtype"]) if "dtype" in doc else None
            key = (path, spec, dtype, headers.get(b"accept"), headers.get(b"accept-encoding"))
            n = len(positions)
            lo, hi = (min(positions), max(positions)) if n else (0, 0)
        else:
            return None
        service, bound = self.service, LIMITS.max_abs_position
        if not (0 < n <= self.max_positions and -bound <= lo and hi <= bound):
            return None
        plan = self._plans.get(key)
        if plan is None or plan.stale(service):
            plan = self._plan(key, path, spec_route, None if content == RAW else doc)
            if plan is None:
                self._plans.pop(key)  # a stale plan whose table is gone
                return None
        table = plan.source(service, lo, hi)
        elements = n * plan.width
        encoded = plan.bound_base + n * plan.bound_per_row  # size_bound((n, plan.width), ...)
        # held until sent: the array at 8 bytes a value (as the endpoint reserves it), and the encoded
        # text (a raw body is a view of the array: no more bytes); the request body is the pipeline's
        held = elements * 8 + (0 if plan.media == RAW else encoded)
        if table is False or cost_ns(elements, table is not None, plan.media) > INLINE_BUDGET_NS \
                or encoded > self.max_whole_bytes or not service.budget.try_take(held):
            return None
        try:
            arr = plan.rows(table, positions, lo)
            payload = plan.body(arr)
        except BaseException:
            service.budget.give_back(held)
            raise
        if plan.gzip and len(payload) >= GZIP_MIN_BYTES:  # the endpoint compresses it
            service.budget.give_back(held)
            return None
        shape = None if plan.media == JSON else b"%d,%d" % arr.shape
        return plan, payload, shape, table is not None, held

    def _plan(self, key: tuple, path: str, spec_route: bool, doc: dict | None) -> Plan | None:
        """The plan of a request shape seen for the first time, from its JSON body `doc` (None: a raw
        body, its fields in the query); None when it is not plain or not valid (the general path
        then answers, or refuses, each request of that shape)."""
        if doc is None:
            doc = _query_fields(key[1])
            if doc is None or not doc.keys() <= _FIELDS[spec_route][1]:
                return None
            if "spec" in doc:
                if doc["spec"][:1] != "{":
                    return None
                doc["spec"] = orjson.loads(doc["spec"])
        dtype_name = doc.get("dtype")
        if (spec_route and type(doc.get("spec")) is not dict) or \
                ("dtype" in doc and (type(dtype_name) is not str or dtype_name not in OUTPUT_DTYPES)):
            return None
        accept, accept_encoding = text_of(key[-2]), text_of(key[-1])
        route = self.service.metrics.layout.index[("POST", path if spec_route else ROWS)]
        try:
            media = negotiate(accept)
            gzip = media == JSON and accepts_gzip(accept_encoding)
            if spec_route:
                dtype = OUTPUT_DTYPES[dtype_name or "float32"]
                table_key, compute, width = SPEC_ROUTES[path](self.service.specs, doc["spec"], dtype)
                plan = Plan(route, media, gzip, dtype, width)
                plan.key, plan.compute = table_key, compute
            else:
                name = path[len(_ROWS_PREFIX):-len(_ROWS_SUFFIX)]
                table = self.service.tables.get(name) if "/" not in name else None
                if table is None:
                    return None
                dtype = dtype_for(table, dtype_name)
                plan = Plan(route, media, gzip, dtype, table.spec.width)
                plan.name, plan.table = name, table
        except Exception:  # not valid: the endpoint gives the error
            return None
        self._plans.put(key, plan)
        return plan


def _query_fields(query: bytes) -> dict | None:
    """A query's fields, each given once (None when one is repeated or the query is malformed)."""
    try:
        pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True, strict_parsing=True) if query else []
    except ValueError:
        return None
    fields = dict(pairs)
    return fields if len(fields) == len(pairs) else None


def _media_type_of_uncached(content_type: bytes | None) -> str:
    """The media type of a Content-Type header's value (clients send one or two spellings)."""
    return media_type(text_of(content_type))


_media_of = header_cache(64)(_media_type_of_uncached)

