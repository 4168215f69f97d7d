"""asyncio client: any number of concurrent calls share one connection. Each call writes its
frame at once and awaits the reply with its request id, so `asyncio.gather` over many calls
pipelines them without waiting for round trips."""

from __future__ import annotations

import asyncio
import itertools
import socket
from typing import Self

from . import calls
from .address import DEFAULT_ADDRESS, parse_address
from .calls import Call, TableRef
from .protocol import HEADER_SIZE, ProtocolError, ServerError, parse_header, reply_from


class AsyncClient:
    """    client = await AsyncClient.connect("127.0.0.1:8001")
        rows = await client.encode("sin128", [0, 1, 2])
        many = await asyncio.gather(*(client.encode("sin128", [p]) for p in range(100)))
        await client.close()
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, timeout: float | None):
        self._reader = reader
        self._writer = writer
        self._timeout = timeout
        self._ids = itertools.count(1)
        self._waiting: dict[int, tuple[Call, asyncio.Future]] = {}
        self._tables: dict[str, asyncio.Future] = {}
        self._closed_by: Exception | None = None
        self._reading = asyncio.get_running_loop().create_task(self._read_replies())

    @classmethod
    async def connect(cls, address=DEFAULT_ADDRESS, *, timeout: float | None = 30.0) -> AsyncClient:
        addr = parse_address(address)
        if addr.family == socket.AF_UNIX:
            opening = asyncio.open_unix_connection(addr.target)
        else:
            opening = asyncio.open_connection(*addr.target)
        reader, writer = await asyncio.wait_for(opening, timeout)
        sock = writer.get_extra_info("socket")
        if addr.family != socket.AF_UNIX and sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(reader, writer, timeout)

    # --- operations ------------------------------------------------------------------------
    async def ping(self, payload: bytes = b"") -> bytes:
        return await self.call(calls.ping(payload))

    async def stats(self) -> dict:
        return await self.call(calls.stats())

    async def list_tables(self) -> list[dict]:
        return await self.call(calls.list_tables())

    async def resolve(self, name: str) -> TableRef:
        return await self.call(calls.resolve(name))

    async def table_id(self, table) -> int:
        """An id for a table name (resolved once per connection, even by concurrent callers)."""
        if isinstance(table, TableRef):
            return table.id
        if isinstance(table, int) and not isinstance(table, bool):
            return table
        if table not in self._tables:
            self._tables[table] = asyncio.ensure_future(self.resolve(table))
        try:
            return (await asyncio.shield(self._tables[table])).id
        except Exception:
            self._tables.pop(table, None)  # let a later call try again
            raise

    async def encode(self, table, positions, *, dtype="float32"):
        return await self.call(calls.encode_table(await self.table_id(table), positions, dtype))

    async def encode_spec(self, spec, positions, *, dtype="float32", seq_len=None):
        if calls.is_mrope(spec, positions):  # [3, n]: one concurrent request per frequency chunk
            batch, assemble = calls.encode_mrope(spec, positions, dtype, seq_len)
            return assemble(await asyncio.gather(*(self.call(call) for call in batch), return_exceptions=True))
        return await self.call(calls.encode_spec(spec, positions, dtype, seq_len))

    # --- transport -------------------------------------------------------------------------
    async def call(self, call: Call):
        if self._closed_by is not None:
            raise ConnectionError(f"the connection is closed ({self._closed_by})")
        request_id = next(self._ids)
        future = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = (call, future)
        self._writer.write(call.frame(request_id))
        try:
            await self._writer.drain()
            return await asyncio.wait_for(asyncio.shield(future), self._timeout)
        finally:
            self._waiting.pop(request_id, None)

    async def _read_replies(self) -> None:
        try:
            while True:
                fields = parse_header(await self._reader.readexactly(HEADER_SIZE))
                payload = bytearray(await self._reader.readexactly(fields[0] - HEADER_SIZE))
                try:
                    outcome = reply_from(fields, payload)
                except ServerError as exc:
                    outcome = exc
                if isinstance(outcome, ServerError) and outcome.closes:
                    self._fail_all(outcome)
                    return
                call, future = self._waiting.get(fields[4], (None, None))
                if future is None or future.done():
                    continue  # the caller timed out or was cancelled
                if isinstance(outcome, Exception):
                    future.set_exception(outcome)
                else:
                    future.set_result(call.decode(outcome))
        except (asyncio.IncompleteReadError, ConnectionError, ProtocolError) as exc:
            self._fail_all(ProtocolError(f"the server closed the connection ({exc})"))

    def _fail_all(self, error: Exception) -> None:
        self._closed_by = error
        for _, future in self._waiting.values():
            if not future.done():
                future.set_exception(error)

    async def close(self) -> None:
        self._reading.cancel()
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except (ConnectionError, OSError):
            pass

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()
