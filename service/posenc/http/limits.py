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

from .budget import Reservation
from .errors import HttpError


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
    """The whole request body, or HttpError 413/408/503 (or ClientGone) as soon as it cannot be."""
    declared = declared_length(scope["headers"])
    too_large = HttpError("body_too_large", f"request body is over the limit of {max_bytes} bytes", "body",
                          headers={"connection": "close"})
    if declared is not None and declared > max_bytes:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise ClientGone
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > max_bytes:
                    raise too_large
                try:
                    reservation.grow(len(chunk), "the request body")
                except HttpError as busy:
                    busy.headers["connection"] = "close"  # the rest of the body will not be read
                    raise
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
    except TimeoutError:
        raise HttpError("request_timeout", f"request body not received within {timeout_s:g} s", "body",
                        headers={"connection": "close"}) from None
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def replay(body: bytes, receive):
    """A receive callable that yields `body` once, then defers to the real one (disconnects)."""
    pending = True

    async def replayed():
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
