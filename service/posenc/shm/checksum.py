"""Data checksums of segments: which algorithm a header names, and computing it fast.

Two algorithms (header field `checksum`, docs/shm-format.md):

* 0, CRC-32: zlib's (IEEE 802.3), `zlib.crc32`. Every segment written before the field
  existed has 0 there, so old files keep verifying.
* 1, CRC-32C (Castagnoli, the iSCSI/ext4/SSE4.2 CRC): the default for new segments, because
  x86-64 computes it in hardware (the `crc32` instruction) at several times zlib's speed.

CRC-32C runs in libposenc (`posenc_crc32c`, native/src/checksum.c: AVX-512 VPCLMULQDQ
folding when the CPU has it, else the SSE4.2 instruction, else a table-driven loop).
Without the native library a numba slice-by-8 loop (crc32c_numba.py, imported only then)
computes the same value, slower: a reader never depends on the native build to verify.
"""

from __future__ import annotations

import ctypes
import zlib

import numpy as np

from ..errors import PosencError
from ..native import LIBRARY

CRC32, CRC32C = 0, 1
NAMES = {CRC32: "crc32", CRC32C: "crc32c"}
CODES = {name: code for code, name in NAMES.items()}
#: What new segments use unless the writer asks for another.
DEFAULT = "crc32c"

#: libposenc's native CRC-32C kernels, fastest first (posenc_crc32c_by accepts each name):
#: VPCLMULQDQ folding with AVX-512 or with AVX2 (Zen 3), the SSE4.2 crc32 instruction, tables.
KERNELS = ("vpclmulqdq", "vpclmulqdq256", "sse4.2", "table")


def _native(name: str, restype, *argtypes):
    """libposenc's function `name` with its C signature, or None (no library, or a build without it)."""
    function = getattr(LIBRARY, name, None) if LIBRARY is not None else None
    if function is not None:
        function.argtypes, function.restype = list(argtypes), restype
    return function


_NATIVE = _native("posenc_crc32c", ctypes.c_uint32, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t)
_NATIVE_BY = _native("posenc_crc32c_by", ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32, ctypes.c_void_p,
                     ctypes.c_size_t, ctypes.POINTER(ctypes.c_uint32))
_NATIVE_PIECES_BY = _native("posenc_crc32c_pieces_by", ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32,
                            ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.POINTER(ctypes.c_uint32))
_NATIVE_KERNEL = _native("posenc_crc32c_kernel", ctypes.c_char_p)


def _bytes_of(data) -> np.ndarray:
    """A zero-copy uint8 view of any C-contiguous buffer (ndarray, bytes, memoryview, mmap)."""
    return np.frombuffer(data if not isinstance(data, np.ndarray) else data.reshape(-1), np.uint8)


def crc32c(data, crc: int = 0, *, native: bool | None = None) -> int:
    """CRC-32C of `data` continuing `crc`, like zlib.crc32's chaining. `native` forces the
    library (True) or numba (False); None picks the library when it is there."""
    view = _bytes_of(data)
    if native is None:
        native = _NATIVE is not None
    if native:
        if _NATIVE is None:
            raise PosencError("native", "libposenc with posenc_crc32c is not loaded (run `make install`)")
        return int(_NATIVE(crc, view.ctypes.data, view.shape[0]))
    from .crc32c_numba import crc32c_software

    return crc32c_software(view, crc)


def crc32c_by(kernel: str, data, crc: int = 0, *, piece: int | None = None) -> int:
    """CRC-32C of `data` continuing `crc` with one named native kernel (KERNELS), for tests
    and benchmarks that compare them; a PosencError where this CPU or build lacks it.
    `piece`: fed to the kernel's stream that many bytes at a time (as the one-pass sin/cos
    kernel feeds it row tiles), which must give the same value."""
    view = _bytes_of(data)
    out = ctypes.c_uint32()
    if piece is None:
        function, args = _NATIVE_BY, ()
    else:
        function, args = _NATIVE_PIECES_BY, (max(1, int(piece)),)
    if function is None or kernel not in KERNELS or function(kernel.encode(), crc, view.ctypes.data, view.shape[0],
                                                             *args, ctypes.byref(out)) != 0:
        raise PosencError("kernel", f"the native CRC-32C kernel {kernel!r} is not available here "
                          f"(available: {native_kernels()})")
    return int(out.value)


def native_kernels() -> list[str]:
    """The native CRC-32C kernels this CPU runs, fastest first: what `crc32c_by` accepts."""
    if _NATIVE_KERNEL is None or _NATIVE_BY is None:
        return []
    probe = ctypes.c_uint32()
    return [kernel for kernel in KERNELS if _NATIVE_BY(kernel.encode(), 0, None, 0, ctypes.byref(probe)) == 0]


def implementation() -> str:
    """Where CRC-32C runs here: "native" (libposenc) or "numba"."""
    return "native" if _NATIVE is not None else "numba"


def code_of(name: str) -> int:
    """The header value of a checksum name ("crc32", "crc32c")."""
    try:
        return CODES[name]
    except (KeyError, TypeError):
        raise PosencError("checksum", f"must be one of {sorted(CODES)}, got {name!r}") from None


def compute(algorithm: int, data, crc: int = 0) -> int:
    """The checksum `algorithm` (a header code) of `data`, continuing `crc`."""
    if algorithm == CRC32C:
        return crc32c(data, crc)
    return zlib.crc32(data, crc)
