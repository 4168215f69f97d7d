"""Blocking client: one connection, calls answered in order, pipelines sent in one write."""

from __future__ import annotations

import itertools
from typing import Self

from ..errors import PosencError
from . import calls
from .address import DEFAULT_ADDRESS, connect
from .calls import Call, TableRef
from .protocol import HEADER_SIZE, ProtocolError, ServerError, parse_header, reply_from

#: Request bytes written before the client reads their replies (see Client.execute).
WINDOW_BYTES = 1 << 20


class Client:
    """A connection to a posenc binary server.

        with Client("127.0.0.1:8001") as c:
            rows = c.encode("sin128", [0, 5, 4096])                     # a published table
            rows = c.encode_spec(posenc.SinusoidalSpec(64), [0.5, 1.5])  # any spec, computed
            p = c.pipeline(); p.encode("sin128", [1]); p.ping(); p.execute()

    Errors the server reports raise `ServerError` (a `PosencError` naming the field). Not
    thread-safe: use one client per thread (or `AsyncClient`)."""

    def __init__(self, address=DEFAULT_ADDRESS, *, timeout: float | None = 30.0):
        self._sock = connect(address, timeout)
        self._rfile = self._sock.makefile("rb", buffering=1 << 16)
        self._ids = itertools.count(1)
        self._tables: dict[str, TableRef] = {}
        self._closed_by: Exception | None = None

    # --- operations ------------------------------------------------------------------------
    def ping(self, payload: bytes = b"") -> bytes:
        return self.call(calls.ping(payload))

    def stats(self) -> dict:
        return self.call(calls.stats())

    def list_tables(self) -> list[dict]:
        return self.call(calls.list_tables())

    def resolve(self, name: str) -> TableRef:
        ref = self.call(calls.resolve(name))
        self._tables[name] = ref
        return ref

    def table_id(self, table) -> int:
        """An id for a table name (resolved once per connection), a TableRef or an id."""
        if isinstance(table, TableRef):
            return table.id
        if isinstance(table, int) and not isinstance(table, bool):
            return table
        ref = self._tables.get(table)
        return (ref or self.resolve(table)).id

    def encode(self, table, positions, *, dtype="float32"):
        """Rows of a published table (name, TableRef or id) at integer positions: [n, width]."""
        return self.call(calls.encode_table(self.table_id(table), positions, dtype))

    def encode_spec(self, spec, positions, *, dtype="float32", seq_len=None):
        """Rows of any SinusoidalSpec / RopeSpec computed by the server: [n, width]. M-RoPE
        positions [3, n] go out as one pipelined request per frequency chunk."""
        if calls.is_mrope(spec, positions):
            batch, assemble = calls.encode_mrope(spec, positions, dtype, seq_len)
            return assemble(self.execute(batch))
        return self.call(calls.encode_spec(spec, positions, dtype, seq_len))

    def pipeline(self) -> Pipeline:
        return Pipeline(self)

    # --- transport -------------------------------------------------------------------------
    def call(self, call: Call):
        (result,) = self.execute([call])
        if isinstance(result, Exception):
            raise result
        return result

    def execute(self, batch: list[Call]) -> list:
        """Send the calls pipelined, then read their replies; a failed call's entry is its
        ServerError. Replies are matched by request id. Requests go out in windows of about
        WINDOW_BYTES, each written at once before its replies are read: a server stops reading
        a client that sends far more than it reads, so an unbounded write could deadlock."""
        if self._closed_by is not None:
            raise ConnectionError(f"this connection is unusable ({self._closed_by})")
        ids = [next(self._ids) for _ in batch]
        frames = [call.frame(i) for call, i in zip(batch, ids)]
        results: dict[int, object] = {}
        start = 0
        while start < len(frames):
            stop, size = start + 1, len(frames[start])
            while stop < len(frames) and size + len(frames[stop]) <= WINDOW_BYTES:
                size += len(frames[stop])
                stop += 1
            self._sock.sendall(b"".join(frames[start:stop]))
            self._collect(dict(zip(ids[start:stop], batch[start:stop])), results)
            start = stop
        return [results[i] for i in ids]

    def _collect(self, pending: dict[int, Call], results: dict) -> None:
        """Read the replies to `pending` into results (each decoded, or its ServerError)."""
        while pending:
            if self._closed_by is not None:  # an earlier reply closed the connection
                results.update(dict.fromkeys(pending, self._closed_by))
                return
            try:
                request_id, outcome = self._read_reply()
            except OSError as exc:  # a timeout mid-reply leaves the stream unusable: stop using it
                self._closed_by = exc
                raise
            if isinstance(outcome, ServerError) and outcome.closes:
                self._closed_by = outcome
                continue
            call = pending.pop(request_id, None)
            if call is None:
                raise ProtocolError(f"reply to request {request_id}, which is not outstanding")
            results[request_id] = outcome if isinstance(outcome, Exception) else call.decode(outcome)

    def _read_exact(self, n: int) -> bytearray:
        buf = bytearray(n)
        view, got = memoryview(buf), 0
        while got < n:
            k = self._rfile.readinto(view[got:])
            if not k:
                self._closed_by = ProtocolError("connection closed")
                raise ProtocolError(f"the server closed the connection ({got} of {n} bytes of a reply read)")
            got += k
        return buf

    def _read_reply(self):
        fields = parse_header(bytes(self._read_exact(HEADER_SIZE)))
        payload = self._read_exact(fields[0] - HEADER_SIZE)
        try:
            return fields[4], reply_from(fields, payload)
        except ServerError as exc:
            return fields[4], exc

    def close(self) -> None:
        self._rfile.close()
        self._sock.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Pipeline:
    """Calls queued on a client and sent together: `execute()` returns their results in order."""

    def __init__(self, client: Client):
        self._client = client
        self._queued: list = []

    def ping(self, payload: bytes = b"") -> Pipeline:
        self._queued.append(lambda: calls.ping(payload))
        return self

    def encode(self, table, positions, *, dtype="float32") -> Pipeline:
        self._queued.append(lambda: calls.encode_table(self._client.table_id(table), positions, dtype))
        return self

    def encode_spec(self, spec, positions, *, dtype="float32", seq_len=None) -> Pipeline:
        self._queued.append(lambda: calls.encode_spec(spec, positions, dtype, seq_len))
        return self

    def __len__(self) -> int:
        return len(self._queued)

    def execute(self, *, raise_on_error: bool = True) -> list:
        """Results in queue order. With raise_on_error, the first ServerError is raised after
        every reply has been read (the connection stays usable unless the error closed it)."""
        batch = [make() for make in self._queued]  # table names are resolved here, before the batch
        self._queued = []
        results = self._client.execute(batch)
        if raise_on_error:
            for result in results:
                if isinstance(result, PosencError):
                    raise result
        return results


def fetch_stats(address=DEFAULT_ADDRESS, *, timeout: float = 2.0) -> dict:
    """The server's STATS (counters, open connections, limits) as a dict; raises OSError when
    the server is unreachable."""
    with Client(address, timeout=timeout) as client:
        return client.stats()
