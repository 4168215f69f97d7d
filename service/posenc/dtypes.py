"""Output dtypes. Everything is computed in float64 (or float32 stores of float64 math)
and cast once at the end; half-precision types are never used for arithmetic."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from .errors import PosencError
from .kernels.active import half_midpoint_rows

OUTPUT_DTYPES: dict[str, np.dtype] = {
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
}

_OUTPUT_DTYPE_SET = frozenset(OUTPUT_DTYPES.values())


def output_dtype(dtype, field: str = "dtype") -> np.dtype:
    """Resolve a dtype name (or numpy dtype) to one of OUTPUT_DTYPES."""
    if isinstance(dtype, np.dtype) and dtype in _OUTPUT_DTYPE_SET:  # already one (np.dtype.name costs microseconds)
        return dtype
    if isinstance(dtype, str):
        key = dtype
    else:
        try:
            key = np.dtype(dtype).name
        except (TypeError, ValueError):  # not a dtype at all (a list, a dict)
            key = None
    if key not in OUTPUT_DTYPES:
        raise PosencError(field, f"unsupported dtype {repr(dtype)[:40]}; choose one of {sorted(OUTPUT_DTYPES)}")
    return OUTPUT_DTYPES[key]


def kernel_dtype(out: np.dtype) -> np.dtype:
    """The dtype kernels write: float32 and float64 directly, half types via a float64 buffer."""
    return out if out in (OUTPUT_DTYPES["float32"], OUTPUT_DTYPES["float64"]) else np.dtype(np.float64)


BFLOAT16 = OUTPUT_DTYPES["bfloat16"]


def cast_output(arr: np.ndarray, out: np.dtype) -> np.ndarray:
    """`arr` as `out`, each value rounded once (to nearest even) from its value in `arr`.

    numpy rounds float64 -> float16 directly; ml_dtypes before 0.7 took float64 -> bfloat16
    through float32 (two roundings: 1 + 2^-8 + 2^-30 became 1.0, not 1.0078125), so that one is
    done here, whatever ml_dtypes is installed, by rounding to float32 *to odd* first, which
    makes the second rounding exact."""
    if arr.dtype == out:
        return arr
    if out == BFLOAT16 and arr.dtype == np.float64:
        return _float64_to_bfloat16(arr)
    return arr.astype(out)


def _float64_to_bfloat16(x: np.ndarray) -> np.ndarray:
    """Round-to-odd into float32 (truncate toward zero, set the last bit if inexact), then
    float32 -> bfloat16 to nearest even: with 24 >= 8 + 2 bits that equals one rounding."""
    with np.errstate(over="ignore"):  # beyond float32: inf, stepped back to the largest float32 below
        y = x.astype(np.float32)
    away = np.abs(y.astype(np.float64)) > np.abs(x)  # rounded up in magnitude: step back toward zero
    y[away] = np.nextafter(y[away], np.float32(0))
    inexact = (y.astype(np.float64) != x).view(np.uint8).astype(np.uint32)  # NaN stays NaN
    return (y.view(np.uint32) | inexact).view(np.float32).astype(BFLOAT16)


#: (stored mantissa bits, smallest normal exponent) of the 16-bit output types
HALF_FORMATS = {OUTPUT_DTYPES["float16"]: (10, -14), BFLOAT16: (7, -126)}


def half_midpoints(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Which values lie exactly halfway between two neighbours of the 16-bit `dtype` grid
    (subnormals and the overflow threshold included): the ones whose rounding to `dtype`
    depends on digits a float32 no longer has."""
    mant, emin = HALF_FORMATS[dtype]
    x = np.abs(values.astype(np.float64))
    _, e = np.frexp(x)  # x = f * 2^e, f in [0.5, 1): the grid step at x is 2^(max(e-1, emin) - mant)
    scaled = np.ldexp(x, mant - np.maximum(e - 1, emin))  # exact: x in units of the grid step
    return scaled - np.floor(scaled) == 0.5


def midpoint_rows(rows: np.ndarray, dtype: np.dtype) -> tuple[np.ndarray, int]:
    """Per row of float32 `rows` (first axis), whether any value is exactly a midpoint of the
    16-bit `dtype` grid, and how many rows are: half_midpoints reduced per row, by one kernel
    pass on the bit patterns where the numpy version makes eight (the numpy one stays the
    oracle of the tests)."""
    flat = rows.reshape(rows.shape[0], math.prod(rows.shape[1:])).view(np.uint32)  # not -1: no rows is valid
    out = np.empty(flat.shape[0], np.bool_)
    mant, emin = HALF_FORMATS[dtype]
    return out, half_midpoint_rows(flat, mant, emin, out)
