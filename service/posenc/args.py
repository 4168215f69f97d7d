"""Argument coercion shared by the public API: every check that names a field lives here,
so kernels receive clean, typed, bounded arrays and never validate anything themselves."""

from __future__ import annotations

import math
import numbers

import numpy as np

from .errors import PosencError
from .limits import LIMITS


def as_int(value, field: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if not isinstance(value, bool) and isinstance(value, numbers.Real) and float(value).is_integer():
            value = int(value)
        else:
            raise PosencError(field, f"must be an integer, got {value!r}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise PosencError(field, f"must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise PosencError(field, f"must be <= {maximum}, got {value}")
    return value


def as_float(value, field: str, *, minimum: float | None = None, exclusive_minimum: float | None = None,
             maximum: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise PosencError(field, f"must be a number, got {value!r}")
    try:
        value = float(value)
    except OverflowError:  # a JSON integer beyond float range (10**400)
        raise PosencError(field, "must be finite, got an integer too large for a float") from None
    if not math.isfinite(value):
        raise PosencError(field, f"must be finite, got {value!r}")
    if minimum is not None and value < minimum:
        raise PosencError(field, f"must be >= {minimum}, got {value}")
    if exclusive_minimum is not None and value <= exclusive_minimum:
        raise PosencError(field, f"must be > {exclusive_minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise PosencError(field, f"must be <= {maximum}, got {value}")
    return value


def as_dim(value, field: str) -> int:
    return as_int(value, field, minimum=1, maximum=LIMITS.max_dim)


def as_choice(value, field: str, choices) -> str:
    if value not in choices:
        raise PosencError(field, f"must be one of {sorted(choices)}, got {value!r}")
    return value


def as_positions(positions, field: str = "positions") -> np.ndarray:
    """Positions as a contiguous 1-D float64 array (a scalar becomes one position).

    Integers are exact in float64 up to 2**53, far beyond `LIMITS.max_abs_position`."""
    try:
        arr = np.asarray(positions)
    except (TypeError, ValueError) as exc:
        raise PosencError(field, f"must be a number or a 1-D array of numbers ({exc})") from None
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise PosencError(field, f"must be 1-D, got shape {arr.shape}")
    if arr.dtype.kind == "f" and arr.dtype.itemsize < 4:
        # float16 positions were rounded before we saw them (2049.0 cannot even be represented)
        raise PosencError(field, f"must be integers or float32/float64, got {arr.dtype}")
    if arr.dtype.kind not in "iuf":
        raise PosencError(field, f"must be numbers, got dtype {arr.dtype}")
    out = np.ascontiguousarray(arr, dtype=np.float64)
    if out.size and not within(out, LIMITS.max_abs_position):  # one pass; the details only for the error
        if not np.isfinite(out).all():
            bad = int(np.flatnonzero(~np.isfinite(out))[0])
            raise PosencError(field, f"must be finite; element {bad} is {out[bad]!r}")
        biggest = float(np.abs(out).max())
        if biggest > LIMITS.max_abs_position:
            raise PosencError(
                field, f"|position| must be <= {LIMITS.max_abs_position} (POSENC_MAX_ABS_POSITION), got {biggest:g}"
            )
    return out


#: Up to this many elements, checks over Python floats beat numpy reductions (~2 us each in numpy 2).
SMALL_ARRAY = 32


def within(values: np.ndarray, bound: float) -> bool:
    """Whether every element of a numeric array is finite and at most `bound` in magnitude
    (NaN fails every comparison, so one pass checks both)."""
    if values.size <= SMALL_ARRAY:
        return all(-bound <= v <= bound for v in values.tolist())
    return bool(np.abs(values).max() <= bound)


def value_range(values: np.ndarray) -> tuple:
    """(least, greatest) element of a non-empty integer or finite float array."""
    if values.size <= SMALL_ARRAY:
        listed = values.tolist()
        return min(listed), max(listed)
    return values.min(), values.max()


def integer_range(values: np.ndarray) -> tuple | None:
    """(least, greatest) of a non-empty float array whose elements are all finite integers, else None."""
    if values.size <= SMALL_ARRAY:
        listed = values.tolist()
        if not all(map(float.is_integer, listed)):  # False for inf and NaN too
            return None
        return min(listed), max(listed)
    if not (np.isfinite(values).all() and np.array_equal(values, np.floor(values))):
        return None
    return values.min(), values.max()


def as_vector(value, field: str, length: int) -> np.ndarray:
    """A finite float64 vector of exactly `length` entries."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer beyond float range
        raise PosencError(field, "must be an array of numbers") from None
    if arr.shape != (length,):
        raise PosencError(field, f"must have shape ({length},), got {arr.shape}")
    if not np.isfinite(arr).all():
        raise PosencError(field, "must be finite")
    return np.ascontiguousarray(arr)
