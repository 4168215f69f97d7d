"""float32 arrays as JSON text in libposenc (`posenc_json_f32`, native/src/json_f32.c).

The text is byte for byte what orjson prints for the same numpy array (every float32 bit pattern
was checked: native/tools/json_f32_exhaustive.py), at a fraction of its cost. Why the call is
shaped the way it is: a one-row response is 128 numbers, printed natively in well under a
microsecond, so the Python side of the call must cost about as little:
  * the array's data pointer, dimension count and shape pointer are read from the ndarray's
    own struct (numpy's public PyArrayObject_fields layout, checked against `arr.ctypes` at import;
    `arr.ctypes.data` costs ~1.5 us, more than printing the row);
  * the text is written into a per-thread buffer reused across calls (sized by the library's own
    capacity bound, grown when a bigger array comes), then copied out as bytes.
`json_f32` returns None when the library (or this function in it) is not loaded: callers then
print with orjson, which gives the same bytes.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from . import LIBRARY
from .library import EINVAL

#: Buffers up to this size are kept for the thread's next call; larger ones are used once.
KEEP_BYTES = 4 << 20
_FLOAT32 = np.dtype(np.float32)


class _ArrayFields(ctypes.Structure):
    """The head of numpy's PyArrayObject_fields (numpy/ndarraytypes.h): data, nd, dimensions."""
    _fields_ = [("ob_refcnt", ctypes.c_ssize_t), ("ob_type", ctypes.c_void_p), ("data", ctypes.c_void_p),
                ("nd", ctypes.c_int), ("dimensions", ctypes.c_void_p)]


def _bind(lib):
    """posenc_json_f32 with its C signature, or None without it."""
    write = getattr(lib, "posenc_json_f32", None) if lib is not None else None
    if write is not None:
        write.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int64]
        write.restype = ctypes.c_int64
    return write


def _fields_match() -> bool:
    """Whether the struct read gives what numpy's own accessors say (else use arr.ctypes)."""
    probe = np.zeros((3, 5), np.float32)[1:]
    fields = _ArrayFields.from_address(id(probe))
    shape = ctypes.cast(fields.dimensions, ctypes.POINTER(ctypes.c_int64))
    return (fields.data == probe.ctypes.data and fields.nd == probe.ndim
            and shape[0] == probe.shape[0] and shape[1] == probe.shape[1])


_BOUND = _bind(LIBRARY)
_DIRECT = _BOUND is not None and ctypes.sizeof(ctypes.c_void_p) == 8 and _fields_match()


class _Buffer(threading.local):
    """One thread's output buffer and its address."""
    def __init__(self):
        self.take(1 << 16)

    def take(self, size: int) -> None:
        self.data = bytearray(size)
        self.view = memoryview(self.data)
        self.address = ctypes.addressof(ctypes.c_char.from_buffer(self.data))


_local = _Buffer()


def available() -> bool:
    return _BOUND is not None


def json_f32(arr: np.ndarray) -> bytes | None:
    """`arr` (C-contiguous native float32, any dimensions) as orjson prints it; None without the library."""
    if _BOUND is None:
        return None
    if not isinstance(arr, np.ndarray):  # a numpy scalar: its struct is not an array's
        arr = np.asarray(arr)
    if arr.dtype != _FLOAT32 or not arr.flags.c_contiguous:
        raise ValueError(f"json_f32 takes a C-contiguous native float32 array, got {arr.dtype}")
    write = _BOUND
    if _DIRECT:
        fields = _ArrayFields.from_address(id(arr))
        data, shape, ndim = fields.data, fields.dimensions, fields.nd
    else:
        dims = (ctypes.c_int64 * max(arr.ndim, 1))(*arr.shape)
        data, shape, ndim = arr.ctypes.data, ctypes.addressof(dims), arr.ndim
    buffer = _local
    size = len(buffer.data)
    length = write(data, shape, ndim, buffer.address, size)
    if length < 0:  # minus the capacity this array needs (posenc.h), or EINVAL for an impossible size
        if length == EINVAL:
            raise ValueError(f"shape {arr.shape}: its JSON text is too large to lay out")
        need = -length
        if need > KEEP_BYTES:
            once = bytearray(need)
            length = write(data, shape, ndim, ctypes.addressof(ctypes.c_char.from_buffer(once)), need)
            return bytes(memoryview(once)[:length])
        buffer.take(need)
        length = write(data, shape, ndim, buffer.address, need)
    return bytes(buffer.view[:length])


__all__ = ["KEEP_BYTES", "available", "json_f32"]
