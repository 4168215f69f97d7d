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
from .library import EINVAL, ENOISA

#: Buffers up to this size are kept for the thread's next call; larger ones are used once.
KEEP_BYTES = 4 << 20
_FLOAT32 = np.dtype(np.float32)


class _ArrayFields(ctypes.Structure):
    """The head of numpy's PyArrayObject_fields (numpy/ndarraytypes.h): data, nd, dimensions."""
    _fields_ = [("ob_refcnt", ctypes.c_ssize_t), ("ob_type", ctypes.c_void_p), ("data", ctypes.c_void_p),
                ("nd", ctypes.c_int), ("dimensions", ctypes.c_void_p)]


def _function(lib, name: str, restype, *argtypes):
    """libposenc's `name` with its C signature, or None (no library, or a build without it)."""
    function = getattr(lib, name, None) if lib is not None else None
    if function is not None:
        function.argtypes, function.restype = list(argtypes), restype
    return function


_ARGS = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int64)
_WRITE = _function(LIBRARY, "posenc_json_f32", ctypes.c_int64, *_ARGS)
_WRITE_BY = _function(LIBRARY, "posenc_json_f32_by", ctypes.c_int64, ctypes.c_char_p, *_ARGS)
_PATH = _function(LIBRARY, "posenc_json_f32_path", ctypes.c_char_p)
#: The writers the library has ("avx512" needs AVX-512 F/BW/DQ/CD/VL), fastest first.
WRITERS = ("avx512", "scalar")


def _fields_match() -> bool:
    """Whether the struct read gives what numpy's own accessors say (else use arr.ctypes)."""
    probe = np.zeros((3, 5), np.float32)[1:]
    fields = _ArrayFields.from_address(id(probe))
    shape = ctypes.cast(fields.dimensions, ctypes.POINTER(ctypes.c_int64))
    return (fields.data == probe.ctypes.data and fields.nd == probe.ndim
            and shape[0] == probe.shape[0] and shape[1] == probe.shape[1])


_DIRECT = _WRITE is not None and ctypes.sizeof(ctypes.c_void_p) == 8 and _fields_match()


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
    return _WRITE is not None


def writer() -> str | None:
    """The writer posenc_json_f32 runs here ("avx512" or "scalar"), or None without the library."""
    return _PATH().decode() if _PATH is not None else None


def json_f32(arr: np.ndarray) -> bytes | None:
    """`arr` (C-contiguous native float32, any dimensions) as orjson prints it; None without the library."""
    return None if _WRITE is None else _print(_WRITE, arr)


def json_f32_by(name: str, arr: np.ndarray) -> bytes | None:
    """json_f32 with a named writer (tests, benchmarks); None where this CPU or build lacks it."""
    if _WRITE_BY is None:
        return None
    path = name.encode()
    try:
        return _print(lambda *args: _WRITE_BY(path, *args), arr)
    except _NoWriter:
        return None


class _NoWriter(Exception):
    """posenc_json_f32_by named a writer this CPU cannot run."""


def _print(write, arr: np.ndarray) -> bytes:
    if not isinstance(arr, np.ndarray):  # a numpy scalar: its struct is not an array's
        arr = np.asarray(arr)
    if arr.dtype != _FLOAT32 or not arr.flags.c_contiguous:
        raise ValueError(f"json_f32 takes a C-contiguous native float32 array, got {arr.dtype}")
    if _DIRECT:
        fields = _ArrayFields.from_address(id(arr))
        data, shape, ndim = fields.data, fields.dimensions, fields.nd
    else:
        dims = (ctypes.c_int64 * max(arr.ndim, 1))(*arr.shape)
        data, shape, ndim = arr.ctypes.data, ctypes.addressof(dims), arr.ndim
    buffer = _local
    length = write(data, shape, ndim, buffer.address, len(buffer.data))
    if length < 0:  # minus the capacity this array needs (posenc.h), or an error code
        if length == ENOISA:
            raise _NoWriter
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


__all__ = ["KEEP_BYTES", "WRITERS", "available", "json_f32", "json_f32_by", "writer"]
