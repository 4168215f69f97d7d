"""The response for one array: bounded in size, streamed when large, gzip-compressed JSON on request.

* Size: `max_output_bytes` caps the encoded response, not only the array. JSON prints each
  number in up to JSON_CHARS characters (a float32 of 4 bytes can take 16, e.g. -0.0000017708425), so a JSON answer is
  refused (413, naming `accept`) when its worst case is over the cap; binary bodies are the array
  (plus, for .npy, a header of at most 128 bytes).
* Streaming: a body over STREAM_BYTES is produced and sent in pieces of about that size, each
  encoded (and compressed) in a worker thread, so a worker holds the array plus one piece, never
  the whole encoded text. `send` waits while the client's socket buffer is full, so a slow reader
  slows its own stream instead of piling bytes up in the worker.
* gzip: JSON of at least GZIP_MIN_BYTES (8 KiB) when the request's Accept-Encoding allows gzip
  (binary arrays of floats barely compress and are left alone).
* Memory: the array's bytes stay charged to the worker's MemoryBudget until the last piece is sent.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterator

import numpy as np
from starlette.responses import Response

from ..pipeline.budget import MemoryBudget, Reservation
from .codecs import JSON, NPY, encode_body, header_cache, headers_for, json_data, json_frame, npy_header, wire_array
from .errors import HttpError

STREAM_BYTES = 1 << 20
GZIP_MIN_BYTES = 8192  # smaller bodies gain little; single table rows (the hot path) stay uncompressed
GZIP_LEVEL = 1  # JSON of numbers compresses ~3x even at level 1, at several hundred MB/s
#: Most characters orjson prints for one element of each dtype kind/size, separator included. float32
#: (and float16, printed as the float32 it widens to): 16 at most, e.g. -0.0000017708425, found over
#: all 2^32 bit patterns by native/tools/json_f32_exhaustive.py; plus the separator.
JSON_CHARS = {("f", 8): 25, ("f", 4): 17, ("f", 2): 17, ("i", 8): 21, ("u", 8): 21}
_DEFAULT_CHARS = 25
_FRAME_BYTES = 256  # the dtype/shape/extra keys around the data


def json_data_bound(arr: np.ndarray) -> int:
    """The most bytes `arr`'s data can take as JSON: every number at its longest, every bracket."""
    return _json_bound(arr.shape, arr.dtype)


def _json_bound(shape: tuple, dtype: np.dtype) -> int:
    per_element = JSON_CHARS.get((dtype.kind, dtype.itemsize), _DEFAULT_CHARS)
    brackets, lists = 0, 1
    for extent in shape:  # each nesting level opens `lists` lists: "[", "]" and a separator each
        brackets += 3 * lists
        lists *= extent
    return lists * per_element + brackets


def encoded_size_bound(arr: np.ndarray, media: str) -> int:
    """The most bytes the response body for `arr` can take in `media` (binary: the array; .npy adds its
    header of at most 128 bytes, which the cap does not count)."""
    return size_bound(arr.shape, arr.dtype, media)


def size_bound(shape: tuple, dtype: np.dtype, media: str) -> int:
    """encoded_size_bound of an array of this shape and dtype, before there is one."""
    return _json_bound(shape, dtype) + _FRAME_BYTES if media == JSON else math.prod(shape) * dtype.itemsize


def check_response_size(arr: np.ndarray, media: str, limit: int) -> None:
    bound = encoded_size_bound(arr, media)
    if bound > limit:
        raise HttpError("output_too_large", f"a {media} response of shape {tuple(arr.shape)} could take {bound} "
                        f"bytes, over the limit of {limit} (max_output_bytes); ask for fewer values"
                        + (" or a binary response (Accept: application/x-npy)" if media == JSON else ""),
                        "accept")


def reserve_response(budget: MemoryBudget, elements: int, limit: int) -> Reservation:
    """The budget charged, before the answer is computed, with its upper bound: `elements` values
    of at most 8 bytes, within the output cap `limit` (resized to the real bytes once known)."""
    return budget.take(min(max(int(elements), 0) * 8, limit), "the response")


def encoded_whole(arr: np.ndarray, media: str, limit: int, extra: dict | None = None) -> tuple[bytes, dict] | None:
    """(body, headers) of `arr` in one piece once it passes the size cap; None when it is large
    enough to stream (ArrayResponse encodes it piece by piece)."""
    check_response_size(arr, media, limit)
    if encoded_size_bound(arr, media) > STREAM_BYTES:
        return None
    return encode_body(arr, media, extra)


def _accepts_gzip_uncached(accept_encoding: str | None) -> bool:
    """Whether Accept-Encoding allows gzip (q=0 refuses it; `*` allows it). Cached: clients send a few
    spellings of it, again and again."""
    for item in (accept_encoding or "").split(","):
        coding, *params = (part.strip() for part in item.split(";"))
        if coding.lower() in ("gzip", "*"):
            for param in params:
                key, _, value = param.partition("=")
                if key.strip() == "q":
                    try:
                        return float(value) > 0
                    except ValueError:
                        return False
            return True
    return False


accepts_gzip = header_cache(256)(_accepts_gzip_uncached)


def _gzip():
    return zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)  # wbits 31: a gzip member


def gzipped(body: bytes) -> bytes:
    compressor = _gzip()
    return compressor.compress(body) + compressor.flush()


def json_pieces(arr: np.ndarray, piece_bytes: int) -> Iterator[bytes]:
    """The JSON of `arr`'s data in pieces of about `piece_bytes`; joined, exactly `json_data(arr)`."""
    per_row = json_data_bound(arr[0]) if arr.ndim and arr.shape[0] else 0
    if arr.ndim == 0 or per_row * arr.shape[0] <= piece_bytes:
        yield json_data(arr)
        return
    rows = piece_bytes // per_row
    yield b"["
    if rows >= 1:
        for i in range(0, arr.shape[0], rows):
            yield (b"," if i else b"") + json_data(arr[i:i + rows])[1:-1]
    else:  # one row is larger than a piece: descend into it
        for i in range(arr.shape[0]):
            if i:
                yield b","
            yield from json_pieces(arr[i], piece_bytes)
    yield b"]"


def json_stream(arr: np.ndarray, extra: dict | None, gzip: bool) -> Iterator[bytes]:
    """The whole JSON document in chunks of about STREAM_BYTES, gzip-compressed when asked."""
    head, tail = json_frame(arr, extra)
    compressor = _gzip() if gzip else None
    pending, size = [head], len(head)
    for piece in json_pieces(arr, STREAM_BYTES):
        pending.append(piece)
        size += len(piece)
        if size >= STREAM_BYTES:
            chunk = b"".join(pending)
            pending, size = [], 0
            chunk = chunk if compressor is None else compressor.compress(chunk)
            if chunk:
                yield chunk
    last = b"".join([*pending, tail])
    yield last if compressor is None else compressor.compress(last) + compressor.flush()


def binary_stream(arr: np.ndarray, media: str) -> Iterator[bytes]:
    """The .npy header (for NPY) then the array's bytes, STREAM_BYTES at a time (one copy per piece)."""
    arr = wire_array(arr)
    if media == NPY:
        yield npy_header(arr)
    data = memoryview(arr.reshape(-1).view(np.uint8))
    for i in range(0, len(data), STREAM_BYTES):
        yield bytes(data[i:i + STREAM_BYTES])


class ArrayResponse(Response):
    """200 with `arr` in `media`: `body` when it was encoded whole (small), else streamed from `arr`.

    `in_thread(fn)` runs fn in a worker thread (JSON pieces are CPU work). The reservation is
    released when the last byte is handed to the server, or the client goes away."""

    def __init__(self, arr: np.ndarray, media: str, extra: dict | None, gzip: bool, reservation: Reservation,
                 in_thread, body: bytes | None = None):
        super().__init__(status_code=200)
        self.raw_headers = [(k.encode("latin-1"), v.encode("latin-1"))
                            for k, v in headers_for(arr, media, extra).items()]
        if gzip:
            self.raw_headers += [(b"content-encoding", b"gzip"), (b"vary", b"accept-encoding")]
        if body is not None:
            self.raw_headers.append((b"content-length", str(len(body)).encode("ascii")))
        self.arr, self.media, self.extra, self.gzip = arr, media, extra, gzip
        self.reservation, self.in_thread, self.encoded = reservation, in_thread, body

    async def __call__(self, scope, receive, send) -> None:
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            if self.encoded is not None:
                await send({"type": "http.response.body", "body": self.encoded})
                return
            if self.media == JSON:
                pieces = json_stream(self.arr, self.extra, self.gzip)
                done = object()
                while (piece := await self.in_thread(lambda: next(pieces, done))) is not done:
                    await send({"type": "http.response.body", "body": piece, "more_body": True})
            else:
                for piece in binary_stream(self.arr, self.media):
                    await send({"type": "http.response.body", "body": piece, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        finally:
            self.arr = None
            self.reservation.release()
