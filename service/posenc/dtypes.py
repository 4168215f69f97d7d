"""Output dtypes. Everything is computed in float64 (or float32 stores of float64 math)
and cast once at the end; half-precision types are never used for arithmetic."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from .errors import PosencError

OUTPUT_DTYPES: dict[str, np.dtype] = {
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
}


def output_dtype(dtype, field: str = "dtype") -> np.dtype:
    """Resolve a dtype name (or numpy dtype) to one of OUTPUT_DTYPES."""
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


def cast_output(arr: np.ndarray, out: np.dtype) -> np.ndarray:
    return arr if arr.dtype == out else arr.astype(out)
