"""GET /v1/tables/{name}/rows/{position} in raw ASGI: one row from shared memory, no framework.

FastAPI's routing, dependency and validation machinery costs ~170 us a request on this
machine, several times what uvicorn itself spends; the single-row lookup is the route
clients hammer, so it is answered here, before FastAPI. Only the plain case is handled:
a GET with no query string or only `dtype=<name>` (a dtype the table serves), an attached
table (stored, or a named computed encoding whose row it computes), a non-negative in-range
integer position (at most 19 digits: int() of a 5000-digit string raises, and no table is that
long) and an Accept header this service can satisfy.
Anything else returns None and goes to the FastAPI route of the same path, which documents
it in OpenAPI, handles the rest (other queries, negative positions, errors) and encodes with
the same codec and the same cast (TableSpec.cast_rows), so both give the same bytes.

Per table, media type and dtype the response headers and, for binary, the bytes around the
row are taken once from `codecs.encode` of row 0; a request in the table's own dtype then
only slices the row's bytes out of the shared-memory mapping.
"""

from __future__ import annotations

import numpy as np

from ...dtypes import OUTPUT_DTYPES
from ...errors import PosencError
from ..api.codecs import JSON, encode, json_data, json_frame, negotiate
from ..api.errors import HttpError
from ..api.responses import GZIP_MIN_BYTES, accepts_gzip
from ..api.routes.rows import dtype_for
from ..runtime.caches import ByteCache
from ..runtime.table_cache import TableCache
from .headers import header, render, text_of
from .prepared import Answer

ROW_ROUTE = ("GET", "/v1/tables/{name}/rows/{position}")
_PREFIX_LEN = len("/v1/tables/")


class _Prepared:
    """What every response for one (table, media type, output dtype) shares."""

    __slots__ = ("cast", "data", "dtype", "headers", "lines", "prefix", "row_bytes", "sized", "table")

    def __init__(self, table, media: str, dtype: np.dtype):
        first = table.rows([table.start], dtype)[0] if table.computed else table.array[0]
        self.dtype = dtype
        self.cast = dtype != first.dtype  # rows cast once from float64 values (TableSpec.cast_rows)
        sample = first.astype(dtype) if self.cast else first  # a row as answered: its dtype, its shape
        body, headers = encode(sample, media)
        self.table = table
        self.headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
        self.row_bytes = first.nbytes
        # binary: the bytes before the row's (the .npy header; none for raw); JSON: the document's head
        self.prefix = json_frame(sample)[0] if media == JSON else body[:len(body) - sample.nbytes]
        self.data = None if table.computed else memoryview(table.array).cast("B")  # computed: no rows held
        #: binary: every answer is the same length, so its whole head, content-length included, is
        #: made here (Answer copies it: the pipeline appends X-Request-Id); JSON: None
        self.sized = None if media == JSON else \
            [*self.headers, (b"content-length", str(len(self.prefix) + sample.nbytes).encode("ascii"))]
        #: the head's lines of `sized` (binary) or of `headers` (JSON, content-length added per answer)
        self.lines = render(self.headers if self.sized is None else self.sized)


class FastRows:
    def __init__(self, service, tables: TableCache, prepared: ByteCache):
        self.service = service
        self._route = None  # the row route's metrics index (metrics open with the lifespan)
        self.tables = tables
        #: (table name, media type, query) -> _Prepared, bounded in bytes and charged to the budget
        self._prepared = prepared

    def answer(self, scope, body: bytes = b"") -> Answer | None:
        """The 200 response (the plan "row", plans.py; `body`, a GET's, is not read), or None when
        FastAPI must decide. The router calls it for GETs of paths under /v1/tables/ only."""
        query = scope["query_string"]
        if query and query not in _DTYPE_QUERIES:
            return None
        name, sep, position = scope["path"][_PREFIX_LEN:].partition("/rows/")
        if not sep or not position.isascii() or not position.isdigit() or len(position) > 19:
            return None
        table = self.tables.get(name)
        if table is None:
            self._forget(name)  # removed: let go of its mapping
            return None
        row = int(position) - table.start
        if not 0 <= row < table.stop - table.start:
            return None
        try:
            media = negotiate(text_of(header(scope, b"accept")))
        except HttpError:
            return None
        prepared = self._prepared.get((name, media, query))
        if prepared is None or prepared.table is not table:  # first use, or the table was replaced
            try:
                dtype = dtype_for(table, _DTYPE_QUERIES[query]) if query else table.spec.np_dtype
                prepared = _Prepared(table, media, dtype)
            except (PosencError, HttpError):  # a dtype the table does not serve, bfloat16 as .npy: FastAPI says so
                return None
            self._prepared.put((name, media, query), prepared)
        if self._route is None:
            self._route = self.service.metrics.layout.index[ROW_ROUTE]
        if table.computed:
            try:
                values = table.row_in_buffer(int(position), prepared.dtype)  # copied out below
            except PosencError:  # beyond this process's position limit: the route says so
                return None
        elif prepared.cast:
            values = table.spec.cast_rows(table.array[row:row + 1], [int(position)], prepared.dtype)[0]
        elif media != JSON:  # the row's bytes straight from the mapping
            start = row * prepared.row_bytes
            return Answer(self.service, self._route, prepared.sized, prepared.lines, [],
                          prepared.prefix + prepared.data[start:start + prepared.row_bytes], True, 0)
        else:
            values = table.array[row]
        if media != JSON:
            return Answer(self.service, self._route, prepared.sized, prepared.lines, [],
                          prepared.prefix + values.tobytes(), True, 0)
        payload = prepared.prefix + json_data(values) + b"}"
        if len(payload) >= GZIP_MIN_BYTES and accepts_gzip(text_of(header(scope, b"accept-encoding"))):
            return None  # a very wide row to a gzip client: the FastAPI route compresses it
        return Answer(self.service, self._route, prepared.headers, prepared.lines,
                      [(b"content-length", b"%d" % len(payload))], payload, True, 0)

    def _forget(self, name: str) -> None:
        self._prepared.drop(lambda key: key[0] == name)


#: The one query this path answers: `dtype=<an output dtype>`, spelled exactly.
_DTYPE_QUERIES = {f"dtype={name}".encode("ascii"): name for name in OUTPUT_DTYPES}
