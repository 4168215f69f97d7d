"""ctypes view of libposenc (native/include/posenc.h) and numpy-level kernel wrappers.

Why ctypes: the C library has no Python in it (pointers and lengths only), so the same
shared object serves this package and the C binary server, needs no build-time Python
headers and no new runtime dependency, and works unchanged across Python versions. ctypes
releases the GIL for every foreign call, so `kernels.run_rows` splits big jobs across
threads exactly as it does for numba. The price is ~5-10 us per call to pull pointers out
of numpy arrays: the API's computations call the active path through the CPython binding
instead (posenc.native.BINDING), and this view serves what needs a named path or a call
made once per block (tests, benchmarks, the one-pass rows + CRC-32C of the shm writer).
"""

from __future__ import annotations

import ctypes
from ctypes import POINTER, c_char_p, c_int, c_int32, c_int64, c_uint32, c_void_p
from pathlib import Path

import numpy as np

from ..errors import PosencError
from ..encodings.columns import ColumnPlan

ABI_VERSION = 6  # POSENC_ABI_VERSION in posenc.h

OK, ENOMEM, EINVAL, ERANGE, ENOISA = 0, -1, -2, -3, -4
DTYPES = {np.dtype(np.float32): 0, np.dtype(np.float64): 1}


class Layout(ctypes.Structure):
    _fields_ = [("row_stride", c_int64), ("sin_base", c_int64), ("cos_base", c_int64), ("n_cos", c_int64),
                ("interleaved", c_int32), ("reserved", c_int32)]


#: Argument types of the five kernels (posenc.h), shared by the table slots and the entry points.
SIGNATURES = {
    "sincos_rows": [c_void_p, c_int64, c_void_p, c_void_p, c_int64, POINTER(Layout), c_void_p, c_int],
    "rope_rotate": [c_void_p, c_void_p, c_int64, c_int64, c_int64, c_int64, c_void_p, c_void_p, c_int64, c_int, c_int],
    "alibi_bias": [c_void_p, c_int64, c_void_p, c_int64, c_void_p, c_int64, c_int, c_void_p, c_int64, c_int],
    "gather_rows": [c_void_p, c_int64, c_int64, c_void_p, c_int64, c_void_p, POINTER(c_int64)],
    "sincos_rows_crc": [c_void_p, c_int64, c_void_p, c_void_p, c_int64, POINTER(Layout), c_void_p, c_int,
                        POINTER(c_uint32)],
}
KERNEL_TYPES = {name: ctypes.CFUNCTYPE(c_int, *argtypes) for name, argtypes in SIGNATURES.items()}


class KernelTable(ctypes.Structure):
    _fields_ = [("name", c_char_p)] + list(KERNEL_TYPES.items())


def open_library(path: Path) -> ctypes.CDLL:
    """dlopen libposenc (its constructor picks the path) and declare its functions."""
    lib = ctypes.CDLL(str(path))
    lib.posenc_abi_version.restype = c_int
    for name in ("posenc_isa", "posenc_dispatch_error", "posenc_cpu_features"):
        getattr(lib, name).restype = c_char_p
    lib.posenc_kernels_for.argtypes = [c_char_p]
    lib.posenc_kernels_for.restype = POINTER(KernelTable)
    lib.posenc_active_kernels.restype = POINTER(KernelTable)
    for name, argtypes in SIGNATURES.items():
        entry = getattr(lib, f"posenc_{name}")
        entry.argtypes, entry.restype = argtypes, c_int
    return lib


def _dtype_code(arr: np.ndarray, field: str) -> int:
    try:
        return DTYPES[arr.dtype]
    except KeyError:
        raise PosencError(field, f"native kernels take float32 or float64, got {arr.dtype}") from None


def _require(ok: bool, field: str, message: str) -> None:
    if not ok:
        raise PosencError(field, message)


def _require_float64(field: str, *arrays: np.ndarray) -> None:
    """Inputs the C code reads as contiguous double arrays."""
    for arr in arrays:
        _require(arr.dtype == np.float64 and arr.flags.c_contiguous, field, "must be C-contiguous float64")


def _check(rc: int, kernel: str) -> None:
    if rc == OK:
        return
    if rc == ENOMEM:
        raise MemoryError(f"posenc native {kernel}: out of memory for scratch")
    raise RuntimeError(f"posenc native {kernel}: failed with code {rc}")


class NativeKernels:
    """One code path's kernels, with the signatures of the numba kernels they replace:
    arrays in, rows lo..hi computed, nothing returned. Arguments are trusted to be what the
    API layer builds (C-contiguous, float64 positions/frequencies); cheap shape checks
    keep a wrong call from writing outside `out`."""

    def __init__(self, table: KernelTable, keepalive):
        self.name = table.name.decode()
        self._keepalive = keepalive  # the CDLL whose memory `table` lives in
        self._sincos = table.sincos_rows
        self._rope = table.rope_rotate
        self._alibi = table.alibi_bias
        self._gather = table.gather_rows
        self._sincos_crc = table.sincos_rows_crc

    def __repr__(self) -> str:
        return f"NativeKernels({self.name!r})"

    def sincos_rows(self, positions: np.ndarray, freqs: np.ndarray, amp: np.ndarray, flat: np.ndarray,
                    plan: ColumnPlan, lo: int, hi: int) -> None:
        """Rows lo..hi of amp*sin / amp*cos(positions x freqs) into `flat` laid out by `plan`."""
        args = self._sincos_args(positions, freqs, amp, flat, plan, lo, hi)
        if args is not None:
            _check(self._sincos(*args), "sincos_rows")

    def sincos_rows_crc(self, positions: np.ndarray, freqs: np.ndarray, amp: np.ndarray, flat: np.ndarray,
                        plan: ColumnPlan, lo: int, hi: int, crc: int) -> int:
        """sincos_rows on this thread, returning the CRC-32C of the rows' bytes continuing `crc`
        (0 to start), computed by the kernel as it writes them. `plan` must be dense (rows
        whole and back to back: `plan_is_dense`), so rows lo..hi are one run of bytes."""
        _require(plan_is_dense(plan, freqs.shape[0]), "plan", "fused checksums need whole, back-to-back rows")
        args = self._sincos_args(positions, freqs, amp, flat, plan, lo, hi)
        if args is None:
            return crc
        value = c_uint32(crc)
        _check(self._sincos_crc(*args, ctypes.byref(value)), "sincos_rows_crc")
        return int(value.value)

    def _sincos_args(self, positions, freqs, amp, flat, plan, lo, hi) -> tuple | None:
        """The checked C arguments of a sin/cos job for rows lo..hi, or None when it writes nothing."""
        dtype = _dtype_code(flat, "out")
        n_sin = freqs.shape[0]
        if hi <= lo or n_sin == 0:
            return None
        if plan.interleaved:
            last = 2 * n_sin - 2 if plan.n_cos < n_sin else 2 * n_sin - 1
        else:
            last = max(plan.sin_base + n_sin - 1, plan.cos_base + plan.n_cos - 1)
        _require(flat.ndim == 1 and flat.flags.c_contiguous and (hi - 1) * plan.row_stride + last < flat.size,
                 "out", "buffer too small for the rows and layout")
        _require(amp.shape == freqs.shape and positions.shape[0] >= hi, "positions", "length mismatch")
        _require_float64("positions", positions, freqs, amp)
        layout = Layout(plan.row_stride, plan.sin_base, plan.cos_base, plan.n_cos, int(plan.interleaved), 0)
        return (positions.ctypes.data + 8 * lo, hi - lo, freqs.ctypes.data, amp.ctypes.data, n_sin,
                ctypes.byref(layout), flat.ctypes.data + flat.itemsize * lo * plan.row_stride, dtype)

    def rope_rotate_rows(self, x: np.ndarray, cos: np.ndarray, sin: np.ndarray, interleaved: bool,
                         out: np.ndarray, lo: int, hi: int) -> None:
        """x, out [B, n, D]; cos, sin [n, n_freq] float64: rotate rows lo..hi (numba signature)."""
        dtype = _dtype_code(x, "x")
        batch, n, width = x.shape
        n_freq = cos.shape[1]
        _require(out.shape == x.shape and out.dtype == x.dtype and x.flags.c_contiguous and out.flags.c_contiguous,
                 "out", "must match x (C-contiguous)")
        _require(cos.shape == sin.shape == (n, n_freq) and cos.flags.c_contiguous and sin.flags.c_contiguous
                 and 2 * n_freq <= width, "cos", "must be [n, n_freq] with 2*n_freq <= head_dim")
        _require_float64("cos", cos, sin)
        if hi <= lo:
            return
        offset = x.itemsize * lo * width
        _check(self._rope(x.ctypes.data + offset, out.ctypes.data + offset, batch, n * width, hi - lo, width,
                          cos.ctypes.data + 8 * lo * n_freq, sin.ctypes.data + 8 * lo * n_freq, n_freq,
                          int(interleaved), dtype), "rope_rotate")

    def alibi_bias_rows(self, slopes: np.ndarray, q_pos: np.ndarray, k_pos: np.ndarray, mode: int,
                        out: np.ndarray, lo: int, hi: int) -> None:
        """out [h, q, k]: bias for query rows lo..hi (numba signature; mode as kernels.MODES)."""
        dtype = _dtype_code(out, "out")
        n_heads, q_len, k_len = out.shape
        _require(out.flags.c_contiguous and slopes.shape == (n_heads,) and q_pos.shape == (q_len,)
                 and k_pos.shape == (k_len,), "out", "must be C-contiguous [h, q, k] matching slopes and positions")
        _require_float64("slopes", slopes, q_pos, k_pos)
        if hi <= lo:
            return
        _check(self._alibi(slopes.ctypes.data, n_heads, q_pos.ctypes.data + 8 * lo, hi - lo, k_pos.ctypes.data,
                           k_len, mode, out.ctypes.data + out.itemsize * lo * k_len, q_len * k_len, dtype),
               "alibi_bias")

    def gather_rows(self, table: np.ndarray, rows: np.ndarray, out: np.ndarray, lo: int, hi: int) -> None:
        """out[k] = table[rows[k]] for k in lo..hi; indices outside the table raise (nothing written)."""
        _require(table.ndim == 2 and table.flags.c_contiguous, "table", "must be a C-contiguous 2-D array")
        _require(out.dtype == table.dtype and out.flags.c_contiguous and out.shape[1:] == table.shape[1:]
                 and out.shape[0] >= hi, "out", "must be C-contiguous [n, width] of the table's dtype")
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        _require(rows.ndim == 1 and rows.shape[0] >= hi, "rows", f"must be 1-D with at least {hi} entries")
        if hi <= lo:
            return
        row_bytes = table.shape[1] * table.itemsize
        bad = c_int64(-1)
        rc = self._gather(table.ctypes.data, table.shape[0], row_bytes, rows.ctypes.data + 8 * lo, hi - lo,
                          out.ctypes.data + row_bytes * lo, ctypes.byref(bad))
        if rc == ERANGE:
            raise PosencError("rows", f"index {int(rows[lo + bad.value])} is outside the table (0..{table.shape[0] - 1})")
        _check(rc, "gather_rows")


def plan_is_dense(plan: ColumnPlan, n_sin: int) -> bool:
    """Whether `plan` writes rows whole and back to back (posenc.h, sincos_rows_crc): every
    element of n * row_stride written, so any rows are one contiguous run of bytes."""
    if plan.row_stride != n_sin + plan.n_cos:
        return False
    if plan.interleaved:
        return plan.n_cos >= n_sin - 1
    return (plan.sin_base, plan.cos_base) in ((0, n_sin), (plan.n_cos, 0))


def kernels_from_pointer(pointer, keepalive) -> NativeKernels | None:
    return NativeKernels(pointer.contents, keepalive) if pointer else None


def kernels_from_symbol(lib: ctypes.CDLL, symbol: str) -> NativeKernels:
    """A kernel table exported by name (the SIMDe-emulated AVX-512 test build)."""
    return NativeKernels(KernelTable.in_dll(lib, symbol), lib)


__all__ = ["ABI_VERSION", "KernelTable", "Layout", "NativeKernels", "kernels_from_pointer", "kernels_from_symbol",
           "open_library", "plan_is_dense"]
