"""Request bodies read under a size cap and a deadline, before any route sees them.

uvicorn hands the app whatever the client sends, as slowly as it sends it. Here the body
is refused from its Content-Length when that is over the cap (without reading a byte),
counted while it streams in (chunked bodies) and abandoned at the deadline, so no client
can make a worker buffer more than `max_body_bytes` or wait on it longer than
`body_timeout_s`; every byte received is also charged to the worker's MemoryBudget (503
when it is spent). The routes then get the body replayed from memory.
"""

from __future__ import annotations

import asyncio
from types import CoroutineType

from .budget import Reservation
from ..api.errors import HttpError


class ClientGone(Exception):
    """The client disconnected before its body arrived: nothing to answer."""


def declared_length(headers) -> int | None:
    for name, value in headers:
        if name == b"content-length":
            try:
                length = int(value)
            except ValueError:
                length = -1
            if length < 0:
                raise HttpError("invalid_body", f"Content-Length {value.decode('latin-1')!r} is not a byte count",
                                "content-length")
            return length
    return None


async def read_body(scope, receive, max_bytes: int, timeout_s: float, reservation: Reservation) -> bytes:
    """The whole request body, or HttpError 413/408/503 (or ClientGone) as soon as it cannot be.

    A body that is already complete in the first message (a small request: uvicorn has parsed it
    with the head) needs no deadline; only a body still to arrive is read under `timeout_s`,
    counted from the first receive. (A deadline is a timer armed and cancelled: ~7 us, more
    than the rest of reading a small body.)"""
    declared = declared_length(scope["headers"])
    body = _Body(max_bytes, reservation)
    if declared is not None and declared > max_bytes:
        raise body.too_large()
    first = started(receive())
    arrived = type(first) is dict
    if arrived and body.add(first):
        return body.joined()
    try:
        async with asyncio.timeout(timeout_s):
            done = False if arrived else body.add(await first)
            while not done:
                done = body.add(await receive())
    except TimeoutError:
        raise HttpError("request_timeout", f"request body not received within {timeout_s:g} s", "body",
                        headers={"connection": "close"}) from None
    return body.joined()


class _Body:
    """The chunks received so far, checked against the size cap and charged to the budget."""

    __slots__ = ("chunks", "max_bytes", "reservation", "size")

    def __init__(self, max_bytes: int, reservation: Reservation):
        self.chunks: list[bytes] = []
        self.size = 0
        self.max_bytes = max_bytes
        self.reservation = reservation

    def too_large(self) -> HttpError:
        return HttpError("body_too_large", f"request body is over the limit of {self.max_bytes} bytes", "body",
                         headers={"connection": "close"})

    def add(self, message) -> bool:
        """Take one received message; True when it was the body's last."""
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        self.size += len(chunk)
        if self.size > self.max_bytes:
            raise self.too_large()
        try:
            self.reservation.grow(len(chunk), "the request body")
        except HttpError as busy:
            busy.headers["connection"] = "close"  # the rest of the body will not be read
            raise
        self.chunks.append(chunk)
        return not message.get("more_body", False)

    def joined(self) -> bytes:
        return self.chunks[0] if len(self.chunks) == 1 else b"".join(self.chunks)


def started(awaitable):
    """What `awaitable` returns when it completes without waiting, else an awaitable of the rest.

    A coroutine is run to its first suspension here: when it finishes there (the message was
    already queued) its result comes back at once, with no task switch and no timer; when it
    suspends, `_Resumed` carries it on from that point."""
    if type(awaitable) is not CoroutineType:
        return awaitable  # a future or other awaitable: awaited as it is
    try:
        pending = awaitable.send(None)
    except StopIteration as done:
        return done.value
    return _Resumed(awaitable, pending)


class _Resumed:
    """The rest of a coroutine that yielded `pending` to its first suspension (the `yield from` that
    `await` would have done, continued): what the task sends or throws in goes on to the coroutine."""

    __slots__ = ("coro", "pending")

    def __init__(self, coro, pending):
        self.coro = coro
        self.pending = pending

    def __await__(self):
        coro, pending = self.coro, self.pending
        while True:
            try:
                sent = yield pending
            except BaseException as exc:  # noqa: BLE001 - cancellation (the deadline) goes into the coroutine
                step, arg = coro.throw, exc
            else:
                step, arg = coro.send, sent
            try:
                pending = step(arg)
            except StopIteration as done:
                return done.value


def replay(body: bytes, receive):
    """A receive callable that yields `body` once, then defers to the real one (disconnects)."""
    return replay_message({"type": "http.request", "body": body, "more_body": False}, receive)


def replay_message(first: dict, receive):
    """A receive callable that returns the message `first` once, then defers to `receive`."""
    pending = [first]

    async def replayed():
        return pending.pop() if pending else await receive()

    return replayed


def resumed(first, receive):
    """A receive callable whose first call finishes `first`, a receive that `started` began and
    that had to wait, then defers to `receive`."""
    pending = [first]

    async def resumed_receive():
        return await pending.pop() if pending else await receive()

    return resumed_receive
