"""Fill sin/cos tables with the trig kernel: shared by sinusoidal and RoPE.

The native SIMD kernel runs where the library is built, the numba one otherwise
(posenc.kernels.active); both compute the same bits (kernels/trig.py), so callers never see
which ran and a row never depends on the rest of its call.
"""

from __future__ import annotations

import functools

import numpy as np

from .. import native
from ..crmath import sincos_rounded
from ..dtypes import cast_output, kernel_dtype
from ..encodings.columns import ColumnPlan
from ..errors import PosencError
from ..kernels.active import run_rows, sincos_rows
from ..kernels.parallel import MIN_PARALLEL_ELEMENTS
from ..kernels.rounding import ambiguous
from ..limits import LIMITS
from ..native.library import plan_is_dense
from ._memo import bytes_lru


#: What one kernel call writes into a new array at the most: under the 8 MiB from which the native
#: kernels stream their stores past the cache (posenc.h), so they store ordinarily. The OS zeroes a
#: new array's pages as the rows first reach them (2 MiB at a time: numpy asks for huge pages), and
#: ordinary stores overwrite those zeros while they are in cache. Measured on the block layouts,
#: whose streaming goes through an L1 tile (RoPE's [cos | sin] rows and cos/sin pairs): a new 64
#: MiB RoPE pair 12.7-12.9 ms against 13.6-14.3 streamed; interleaved rows (then streamed directly,
#: through the tile too since dff2940) the same either way (docs/benchmarks.md, "New arrays"). Into a
#: warm buffer streaming wins: no zeros.
FRESH_CALL_BYTES = 4 << 20


def fill_sincos(positions: np.ndarray, freqs: np.ndarray, amplitude: np.ndarray, flat: np.ndarray,
                plan: ColumnPlan, *, fresh: bool = False) -> None:
    """Write every row of `positions` into the contiguous 1-D buffer `flat` following `plan`;
    `fresh`: `flat` is a new array whose pages were never touched (see FRESH_CALL_BYTES)."""
    n_rows, width = positions.shape[0], freqs.shape[0] + plan.n_cos
    kernel = sincos_rows
    if fresh and n_rows * width * flat.itemsize > FRESH_CALL_BYTES:
        kernel = functools.partial(_sincos_in_calls, max(1, FRESH_CALL_BYTES // (width * flat.itemsize)))
    run_rows(kernel, n_rows, width, positions, freqs, amplitude, flat, plan.row_stride, plan.sin_base,
             plan.cos_base, plan.interleaved, plan.n_cos)


def _sincos_in_calls(rows_per_call: int, *args) -> None:
    """sincos_rows(*args) over its rows lo..hi (the last two arguments), `rows_per_call` at a time."""
    *job, lo, hi = args
    for start in range(lo, hi, rows_per_call):
        sincos_rows(*job, start, min(start + rows_per_call, hi))


def fill_sincos_crc32c(positions: np.ndarray, freqs: np.ndarray, amplitude: np.ndarray, flat: np.ndarray,
                       plan: ColumnPlan, crc: int) -> int | None:
    """fill_sincos on this thread, returning the CRC-32C of the rows' bytes continuing `crc`:
    the native kernel checksums each tile of rows while it is in L1, before storing it, so
    the rows are not read back (the shm writer's one pass over memory). None, with nothing
    written, where that kernel cannot: no native library, or a plan whose rows have gaps."""
    if native.ACTIVE is None or not plan_is_dense(plan, freqs.shape[0]):
        return None
    return native.ACTIVE.sincos_rows_crc(positions, freqs, amplitude, flat, plan, 0, positions.shape[0], crc)


def checked_out(out, shape: tuple[int, int], dtype: np.dtype) -> np.ndarray:
    """`out` as the kernels take it: an ndarray of `shape` and the kernel dtype of `dtype`,
    C-contiguous and writable; else PosencError naming `out`. Any start address is fine: 16, 32 or
    48 bytes past a cache line (numpy's own arrays: +16) as fast as aligned. A view numpy cannot flatten in
    place would be filled in a flattened copy, leaving the caller's array as it was, and a short one
    written past its end on the numba path: both are refused here, on every path alike."""
    want = kernel_dtype(dtype)
    if not isinstance(out, np.ndarray):
        raise PosencError("out", f"must be a numpy array, got {type(out).__name__}")
    if out.shape != shape or out.dtype != want:
        raise PosencError("out", f"must have shape {list(shape)} and dtype {want}, got {list(out.shape)} {out.dtype}")
    if not (out.flags.c_contiguous and out.flags.writeable):
        raise PosencError("out", "must be C-contiguous and writable (a strided view: pass its base, or "
                          "copy the result into it)")
    return out


def cast_exact(values: np.ndarray, dtype: np.dtype, freqs: np.ndarray, amplitude: np.ndarray,
               columns: tuple[np.ndarray, np.ndarray], position_at) -> np.ndarray:
    """float64 kernel sin/cos values [n, width] as `dtype`, each the exact value rounded once: the
    cast of its float64 value wherever that decides the rounding (kernels/rounding.py), else
    posenc.crmath.sincos_rounded (for 16-bit types, about one value in 2^34: values within 2^-48
    of a rounding boundary). columns: ColumnPlan.sources; position_at(row, column) -> float."""
    out = cast_output(values, dtype)
    if out is values:
        return out
    freq, cosine = columns
    amp = np.where(freq >= 0, amplitude[np.maximum(freq, 0)], 0.0)
    for r, c in zip(*(axis.tolist() for axis in np.nonzero(ambiguous(values, amp, dtype)))):
        if freq[c] >= 0:
            out[r, c] = sincos_rounded(position_at(r, c), freqs[freq[c]], amp[c], "cos" if cosine[c] else "sin",
                                       dtype.name)
    return out


class SincosRows:
    """fill_sincos into a fresh [n, width] array of `out_dtype`, with its frequencies, amplitude
    and column plan fixed: the rows function of one spec and dtype, called per request by the
    HTTP service's prepared plans. A job too small to split across threads calls the kernel
    directly: resolving the plan again each call cost more than computing a row."""

    __slots__ = ("amplitude", "columns", "freqs", "kernel_dtype", "layout", "out_dtype", "plan", "row_bytes", "width")

    def __init__(self, freqs: np.ndarray, amplitude: np.ndarray, plan: ColumnPlan, out_dtype: np.dtype):
        self.freqs, self.amplitude, self.plan, self.out_dtype = freqs, amplitude, plan, out_dtype
        self.width = freqs.shape[0] + plan.n_cos
        self.row_bytes = self.width * out_dtype.itemsize
        self.kernel_dtype = kernel_dtype(out_dtype)
        self.layout = (plan.row_stride, plan.sin_base, plan.cos_base, plan.interleaved, plan.n_cos)
        self.columns = plan.sources(freqs.shape[0], self.width)

    def cast(self, values: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """The kernel's rows of `positions` as out_dtype (16-bit types: cast_exact)."""
        if values.dtype is self.out_dtype:
            return values
        return cast_exact(values.reshape(-1, self.width), self.out_dtype, self.freqs, self.amplitude, self.columns,
                          lambda r, c: float(positions[r])).reshape(values.shape)

    def __call__(self, positions: np.ndarray, out=None) -> np.ndarray:
        n = positions.shape[0]
        if n * self.row_bytes > LIMITS.max_output_bytes:
            LIMITS.check_output((n, self.width), self.out_dtype.itemsize)  # raises, naming the limit
        fresh = out is None
        if fresh:
            out = np.empty((n, self.width), dtype=self.kernel_dtype)
        else:
            checked_out(out, (n, self.width), self.out_dtype)
        flat = out.reshape(-1)
        if n * self.width < MIN_PARALLEL_ELEMENTS:
            sincos_rows(positions, self.freqs, self.amplitude, flat, *self.layout, 0, n)
        else:
            fill_sincos(positions, self.freqs, self.amplitude, flat, self.plan, fresh=fresh)
        return self.cast(out, positions)


class PlannedRows(SincosRows):
    """SincosRows whose small jobs run on a native plan of its frequencies (posenc_sincos_plan: the
    sincos of the positions' mid and fine parts kept between calls), for rows asked again and again
    of one spec, a few at a time: a named computed table's. A row of a random integer position then
    costs one part sincos per frequency instead of three, and no scratch; the same bits. Without the
    native binding, or for a job worth threads, it is SincosRows."""

    __slots__ = ("native_plan", "_position", "_row")

    def __init__(self, freqs: np.ndarray, amplitude: np.ndarray, plan: ColumnPlan, out_dtype: np.dtype):
        super().__init__(freqs, amplitude, plan, out_dtype)
        binding = native.BINDING
        self.native_plan = None if binding is None else binding.sincos_plan(freqs, amplitude)
        self._position = np.empty(1)
        self._row = np.empty(self.width, dtype=self.kernel_dtype)

    def one_row(self, position: float) -> np.ndarray:
        """The row [width] at one (validated) position, in a buffer this object reuses: valid until
        its next call, so for one thread that uses it at once (HTTP's single-row path, which copies
        the bytes out). A new array where the dtype is cast. Half a microsecond less than a call."""
        if self.native_plan is None:
            return self(np.array([position], dtype=np.float64))[0]
        self._position[0] = position
        native.BINDING.sincos_plan_rows(self.native_plan, self._position, self._row, *self.layout)
        return self.cast(self._row, self._position)

    def __call__(self, positions: np.ndarray, out=None) -> np.ndarray:
        n = positions.shape[0]
        if self.native_plan is None or n * self.width >= MIN_PARALLEL_ELEMENTS:
            return super().__call__(positions, out)
        if out is None:
            out = np.empty((n, self.width), dtype=self.kernel_dtype)
        else:
            checked_out(out, (n, self.width), self.out_dtype)
        native.BINDING.sincos_plan_rows(self.native_plan, positions, out.reshape(-1), *self.layout)
        return self.cast(out, positions)


@bytes_lru(8 << 20)
def constant_amplitude(n: int, value: float) -> np.ndarray:
    """np.full(n, value), built once per (n, value) and shared, so never written: the amplitude
    of every frequency when they all share one (building it cost more than computing a row).
    Left writable: a read-only array is another type to the numba kernels, compiled again."""
    return np.full(n, value)


def fill_cos_sin_pair(positions: np.ndarray, freqs: np.ndarray, amplitude: float, dtype) -> tuple[np.ndarray, np.ndarray]:
    """Contiguous (cos, sin) [n, n_freq] arrays: one [2, n, n_freq] buffer, cos block then sin block."""
    n, n_freq = positions.shape[0], freqs.shape[0]
    buf = np.empty((2, n, n_freq), dtype=dtype)
    plan = ColumnPlan(row_stride=n_freq, sin_base=n * n_freq, cos_base=0, interleaved=False, n_cos=n_freq)
    fill_sincos(positions, freqs, constant_amplitude(n_freq, amplitude), buf.reshape(-1), plan, fresh=True)
    return buf[0], buf[1]
