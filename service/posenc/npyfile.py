"""A .npy file's bytes as an array, without trusting its header.

The header's shape must account for exactly the bytes that follow before anything is
allocated, so a lying header (a huge shape over a few bytes) is an error, never a large
allocation; object arrays (pickles) are refused. Shared by the HTTP codecs and posenc.audit.
"""

from __future__ import annotations

import io

import numpy as np

_HEADER_READERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
MAX_HEADER_BYTES = 4096


def parse_npy(data: bytes, what: str = "file") -> np.ndarray:
    """The array in `data` (a read-only view of it), or ValueError saying what is wrong."""
    fp = io.BytesIO(bytes(memoryview(data)[:MAX_HEADER_BYTES + 16]))  # the header only: `data` may be a
    try:  # memory-mapped file of hundreds of MB, read later in chunks by whoever uses the array
        version = np.lib.format.read_magic(fp)
        reader = _HEADER_READERS.get(version)
        if reader is None:
            raise ValueError(f"unsupported .npy version {version}")
        shape, fortran_order, dtype = reader(fp, max_header_size=MAX_HEADER_BYTES)
    except ValueError as exc:
        raise ValueError(f"not a valid .npy {what}: {exc}") from None
    if dtype.hasobject:
        raise ValueError(f".npy dtype must be numeric, got {dtype}")
    count = span = 1
    for s in shape:  # numpy's header reader takes any Python int
        if not isinstance(s, int) or s < 0:
            raise ValueError(f".npy header shape {shape} must hold non-negative integers")
        count *= s
        span *= max(s, 1)
    if len(shape) > 32 or span >= 2**62:  # numpy refuses such shapes even when they hold no element
        raise ValueError(f".npy header shape {shape} is too large")
    offset = fp.tell()
    if len(data) - offset != count * dtype.itemsize:
        raise ValueError(f".npy header says shape {shape} ({count * dtype.itemsize} bytes) but "
                         f"{len(data) - offset} bytes follow")
    arr = np.frombuffer(data, dtype=dtype, count=count, offset=offset)
    try:
        return arr.reshape(shape, order="F" if fortran_order else "C")
    except ValueError as exc:  # empty, with dimensions numpy cannot index (2**62 x 0)
        raise ValueError(f".npy header shape {shape}: {exc}") from None
