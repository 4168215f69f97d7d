"""gzip for the whole JSON documents FastAPI answers (/openapi.json, table listings, /info, model
summaries, audit reports, explorer figures) when the client's Accept-Encoding allows it.

Array responses compress themselves (`responses.ArrayResponse`, streamed piece by piece); this
covers the rest with the same rule: a JSON body of at least GZIP_MIN_BYTES, sent in one piece
and not already encoded, is gzip-compressed (with `Vary: accept-encoding`). Anything else (binary,
streamed, small, HEAD) passes untouched.
"""

from __future__ import annotations

from ..pipeline.headers import header
from .responses import GZIP_MIN_BYTES, accepts_gzip, gzipped

_SKIPPED = (b"content-length", b"content-encoding")


class GzipJson:
    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        accept_encoding = header(scope, b"accept-encoding") if scope["type"] == "http" else None
        if not accepts_gzip(None if accept_encoding is None else accept_encoding.decode("latin-1")):
            await self.app(scope, receive, send)
            return
        pending = None  # the response head, held until the body shows whether to compress

        async def compressing(message):
            nonlocal pending
            if message["type"] == "http.response.start":
                pending = message
                return
            if pending is None:  # the head went out already: later pieces pass through
                await send(message)
                return
            start, pending = pending, None
            body = message.get("body", b"")
            headers = dict(start.get("headers", ()))
            if (message.get("more_body") or len(body) < GZIP_MIN_BYTES or b"content-encoding" in headers
                    or not headers.get(b"content-type", b"").startswith(b"application/json")):
                await send(start)
                await send(message)
                return
            body = gzipped(body)
            kept = [(k, v) for k, v in start.get("headers", ()) if k not in _SKIPPED]
            await send({**start, "headers": [*kept, (b"content-encoding", b"gzip"), (b"vary", b"accept-encoding"),
                                             (b"content-length", str(len(body)).encode("ascii"))]})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, compressing)
