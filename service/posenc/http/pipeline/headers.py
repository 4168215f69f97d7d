"""What every request's headers are checked for, whichever path answers it: the request id, the
API key, and what the service does not speak (a content coding, a WebSocket upgrade).

X-Request-Id: the client's when it is 1..128 of [A-Za-z0-9._~:/+=@-] (any other value is a 422),
else a generated one: 8 random hex digits per process, then a counter (unique per worker without
a syscall per request; urandom would cost a microsecond on the hot route).
"""

from __future__ import annotations

import hmac
import itertools
import os
import re

from ..api.errors import HttpError

REQUEST_ID_HEADER = b"x-request-id"
CONTENT_ENCODING = b"content-encoding"
UPGRADE = b"upgrade"
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


def plain(scope) -> bool:
    """Whether a request has neither a Content-Encoding nor an Upgrade header, the ones
    `unspoken` looks at (one loop, on the hot path: the `now` plans answer only plain requests)."""
    for key, _ in scope["headers"]:
        if key == CONTENT_ENCODING or key == UPGRADE:
            return False
    return True


def tokens(value: bytes) -> list[bytes]:
    """The lower-case elements of a comma-separated header value, empty ones left out."""
    return [token for token in (part.strip().lower() for part in value.split(b",")) if token]


def unspoken(scope) -> HttpError | None:
    """The refusal of a request in a form the service does not speak, or None:
      * a body with a content coding (Content-Encoding other than identity): 415, with
        Accept-Encoding: identity (RFC 9110 section 12.5.3) -- the service decodes none, and
        reading gzip as JSON or as raw positions would answer the wrong question;
      * a WebSocket handshake (Upgrade: websocket): 400 -- no route speaks it, and a WebSocket
        client cannot use an HTTP answer. Other upgrades (h2c) are optional for the client:
        the protocol ignores them and the request is answered over HTTP/1.1."""
    for key, value in scope["headers"]:
        if key == CONTENT_ENCODING and any(token != b"identity" for token in tokens(value)):
            return HttpError("unsupported_media_type", f"Content-Encoding {text_of(value)[:100]!r}: send the body "
                             "without a content coding (this service decodes none)", "content-encoding",
                             headers={"accept-encoding": "identity"})
        if key == UPGRADE and any(token.split(b"/")[0] == b"websocket" for token in tokens(value)):
            return HttpError("unsupported_upgrade", "Upgrade: websocket: this service speaks HTTP/1.1 only and has "
                             "no WebSocket route; send the request without Upgrade", "upgrade")
    return None


def bearer_matches(authorization: bytes | None, api_key: bytes) -> bool:
    """Whether an Authorization header value is `Bearer <api_key>` (compared in constant time)."""
    scheme, _, token = (authorization or b"").partition(b" ")
    return scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(), api_key)
