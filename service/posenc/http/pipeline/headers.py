"""What every request's headers are checked for, whichever path answers it: the request id and the API key.

X-Request-Id: the client's when it is 1..128 of [A-Za-z0-9._~:/+=@-] (any other value is a 422),
else a generated one: 8 random hex digits per process, then a counter (unique per worker without
a syscall per request; urandom would cost a microsecond on the hot route).
"""

from __future__ import annotations

import hmac
import itertools
import os
import re

REQUEST_ID_HEADER = b"x-request-id"
_REQUEST_ID = re.compile(rb"[A-Za-z0-9._~:/+=@-]{1,128}")
_ID_PREFIX = int.from_bytes(os.urandom(4), "big") << 32  # the high half of every generated id, as an int
_ID_COUNTER = itertools.count()


def _reseed_ids() -> None:
    global _ID_PREFIX
    _ID_PREFIX = int.from_bytes(os.urandom(4), "big") << 32


os.register_at_fork(after_in_child=_reseed_ids)  # forked workers must not share a prefix


def header(scope, name: bytes) -> bytes | None:
    """The first value of a request header (lower-case `name`), or None."""
    for key, value in scope["headers"]:
        if key == name:
            return value
    return None


def text_of(value: bytes | None) -> str | None:
    """A header value as text (latin-1, as HTTP/1.1 carries it), None for a missing one."""
    return None if value is None else value.decode("latin-1")


def render(headers) -> bytes:
    """(name, value) pairs as the header lines of an HTTP/1.1 head: `name: value\r\n` each."""
    lines = []
    for name, value in headers:
        lines += (name, b": ", value, b"\r\n")
    return b"".join(lines)


def new_request_id() -> str:
    """16 hex digits: the process's prefix, then the counter (`bytes.hex` of one int: half the
    cost of formatting the two halves)."""
    return (_ID_PREFIX | next(_ID_COUNTER) & 0xFFFFFFFF).to_bytes(8, "big").hex()


def request_id_from(given: bytes | None) -> tuple[str, bool]:
    """(the request's id, whether the client's was acceptable) from its X-Request-Id value: a
    missing or empty one is generated."""
    if not given:
        return new_request_id(), True
    if _REQUEST_ID.fullmatch(given):
        return given.decode("ascii"), True
    return new_request_id(), False


def request_id_of(scope) -> tuple[str, bool]:
    """request_id_from the request's X-Request-Id (`header`'s loop inlined: every request runs this)."""
    for key, value in scope["headers"]:
        if key == REQUEST_ID_HEADER:
            return request_id_from(value)
    return new_request_id(), True


def bearer_matches(authorization: bytes | None, api_key: bytes) -> bool:
    """Whether an Authorization header value is `Bearer <api_key>` (compared in constant time)."""
    scheme, _, token = (authorization or b"").partition(b" ")
    return scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(), api_key)
