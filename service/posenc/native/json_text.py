"""float32 arrays as JSON text in libposenc (`posenc_json_f32`, native/src/json_f32.c).

The text is byte for byte what orjson prints for the same numpy array (every float32 bit pattern
was checked: native/tools/json_f32_exhaustive.py), at a fraction of its cost. Why the call is
shaped the way it is: a one-row response is 128 numbers, printed natively in well under a
microsecond, so the Python side of the call must cost about as little:
  * two arguments: the ndarray's own address, which posenc_json_f32_array reads as its data
    pointer, dimension count and shape (numpy's PyArrayObject_fields head, checked against
    `arr.ctypes` at import; `arr.ctypes.data` alone costs ~1.5 us, more than printing the row,
    and each ctypes argument ~0.1 us), and the thread's buffer struct;
  * the text goes into that per-thread buffer, reused across calls (sized by the library's own
    capacity bound, grown when a bigger array comes), then is copied out as bytes.
`json_f32` returns None when the library (or this function in it) is not loaded: callers then
print with orjson, which gives the same bytes.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from . import LIBRARY
from .library import EINVAL, ENOISA

#: Buffers up to this size are kept for the thread's next call (a 64 x 128 answer needs ~150 KiB), so a
#: server's worker threads hold at most this much each; larger texts get a buffer used once.
KEEP_BYTES = 256 << 10
_FLOAT32 = np.dtype(np.float32)


class ArrayHead(ctypes.Structure):
    """posenc_json_array (posenc.h): the head of numpy's PyArrayObject_fields (numpy/ndarraytypes.h)."""
    _fields_ = [("object_head", ctypes.c_void_p * 2), ("data", ctypes.c_void_p), ("ndim", ctypes.c_int32),
                ("shape", ctypes.c_void_p)]


class OutBuffer(ctypes.Structure):
    """posenc_json_buffer (posenc.h)."""
    _fields_ = [("data", ctypes.c_void_p), ("capacity", ctypes.c_int64)]


def _function(lib, name: str, restype, *argtypes):
    """libposenc's `name` with its C signature, or None (no library, or a build without it)."""
    function = getattr(lib, name, None) if lib is not None else None
    if function is not None:
        function.argtypes, function.restype = list(argtypes), restype
    return function


_ARGS = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int64)
_WRITE_ARRAY = _function(LIBRARY, "posenc_json_f32_array", ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p)
_WRITE_BY = _function(LIBRARY, "posenc_json_f32_by", ctypes.c_int64, ctypes.c_char_p, *_ARGS)
_PATH = _function(LIBRARY, "posenc_json_f32_path", ctypes.c_char_p)
#: The writers the library has ("avx512" needs AVX-512 F/BW/DQ/CD/VL, "avx2" AVX2), fastest first.
WRITERS = ("avx512", "avx2", "scalar")


def _head_matches() -> bool:
    """Whether an ndarray's own head reads as posenc_json_array (checked against numpy's accessors)."""
    probe = np.zeros((3, 5), np.float32)[1:]
    head = ArrayHead.from_address(id(probe))
    shape = ctypes.cast(head.shape, ctypes.POINTER(ctypes.c_int64))
    return (head.data == probe.ctypes.data and head.ndim == probe.ndim
            and shape[0] == probe.shape[0] and shape[1] == probe.shape[1])


#: Whether an ndarray's address can be passed as a posenc_json_array (else a copy of its head is made).
DIRECT = _WRITE_ARRAY is not None and ctypes.sizeof(ctypes.c_void_p) == 8 and _head_matches()


class _Buffer(threading.local):
    """One thread's output buffer, its posenc_json_buffer and the struct's address."""
    def __init__(self):
        self.take(1 << 16)

    def take(self, size: int) -> None:
        self.data = bytearray(size)
        self.view = memoryview(self.data)
        self.out = OutBuffer(ctypes.addressof(ctypes.c_char.from_buffer(self.data)), size)
        self.address = ctypes.addressof(self.out)


_local = _Buffer()


def available() -> bool:
    return _WRITE_ARRAY is not None


def writer() -> str | None:
    """The writer posenc_json_f32 runs here ("avx512", "avx2" or "scalar"), or None without the library."""
    return _PATH().decode() if _PATH is not None else None


def json_f32(arr: np.ndarray) -> bytes | None:
    """`arr` (C-contiguous native float32, any dimensions) as orjson prints it; None without the library."""
    if _WRITE_ARRAY is None:
        return None
    return json_f32_checked(_checked(arr))


def json_f32_checked(arr: np.ndarray) -> bytes:
    """json_f32 of an ndarray the caller has checked: C-contiguous float32 in native byte order, the
    library loaded (codecs.json_data's hot path: each check costs ~0.1 us of a ~2 us call)."""
    head = id(arr) if DIRECT else ctypes.addressof(_head_of(arr))
    buffer = _local
    length = _WRITE_ARRAY(head, buffer.address)
    if length < 0:
        return _grown(lambda out: _WRITE_ARRAY(head, ctypes.addressof(out)), arr, length)
    return bytes(buffer.view[:length])


def json_f32_by(name: str, arr: np.ndarray) -> bytes | None:
    """json_f32 with a named writer (tests, benchmarks); None where this CPU or build lacks it."""
    if _WRITE_BY is None:
        return None
    arr = _checked(arr)
    shape = (ctypes.c_int64 * max(arr.ndim, 1))(*arr.shape)
    path = name.encode()

    def write(out: OutBuffer) -> int:
        return _WRITE_BY(path, arr.ctypes.data, shape, arr.ndim, out.data, out.capacity)

    length = write(_local.out)
    if length == ENOISA:
        return None
    if length < 0:
        return _grown(write, arr, length)
    return bytes(_local.view[:length])


def _checked(arr) -> np.ndarray:
    if not isinstance(arr, np.ndarray):  # a numpy scalar: its struct is not an array's
        arr = np.asarray(arr)
    if arr.dtype != _FLOAT32 or not arr.flags.c_contiguous:
        raise ValueError(f"json_f32 takes a C-contiguous native float32 array, got {arr.dtype}")
    return arr


def _head_of(arr: np.ndarray) -> ArrayHead:
    """A posenc_json_array filled in from numpy's accessors (where the direct read is not checked)."""
    shape = (ctypes.c_int64 * max(arr.ndim, 1))(*arr.shape)
    head = ArrayHead((None, None), arr.ctypes.data, arr.ndim, ctypes.addressof(shape))
    head.keepalive = shape
    return head


def _grown(write, arr: np.ndarray, length: int) -> bytes:
    """The text of an array whose capacity (-length: posenc.h) is over the thread's buffer: in a bigger
    buffer kept for next time, or up to KEEP_BYTES; in a one-off one past that."""
    if length == EINVAL:
        raise ValueError(f"shape {arr.shape}: its JSON text is too large to lay out")
    need = -length
    if need > KEEP_BYTES:
        once = bytearray(need)
        out = OutBuffer(ctypes.addressof(ctypes.c_char.from_buffer(once)), need)
        return bytes(memoryview(once)[:write(out)])
    _local.take(need)
    return bytes(_local.view[:write(_local.out)])


__all__ = ["DIRECT", "KEEP_BYTES", "WRITERS", "ArrayHead", "OutBuffer", "available", "json_f32", "json_f32_by",
           "json_f32_checked", "writer"]
