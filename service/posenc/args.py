"""Argument coercion shared by the public API: every check that names a field lives here,
so kernels receive clean, typed, bounded arrays and never validate anything themselves."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping

import numpy as np

from .errors import PosencError, PositionBeyondLimit
from .limits import LIMITS


#: Python types as JSON names them (messages about a config.json or a request body speak JSON).
_JSON_TYPES = {type(None): "null", bool: "boolean", int: "number", float: "number", str: "string", list: "array",
               dict: "object"}


def json_type(value) -> str:
    """The JSON name of a value's type ("array", not "list"; "null", not "NoneType")."""
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _shown(value) -> str:
    """A value for an error message, bounded (a hostile value may be a 10,000-digit integer)."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def as_int(value, field: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """An integer (an integral float such as 4.0 included); booleans are not numbers."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise PosencError(field, f"must be an integer, got {_shown(value)}")
    if not isinstance(value, numbers.Integral):
        if not math.isfinite(value) or not float(value).is_integer():
            raise PosencError(field, f"must be an integer, got {_shown(value)}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise PosencError(field, f"must be >= {minimum}, got {_shown(value)}")
    if maximum is not None and value > maximum:
        raise PosencError(field, f"must be <= {maximum}, got {_shown(value)}")
    return value


def as_float(value, field: str, *, minimum: float | None = None, exclusive_minimum: float | None = None,
             maximum: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise PosencError(field, f"must be a number, got {_shown(value)}")
    try:
        value = float(value)
    except OverflowError:  # an integer beyond float64
        raise PosencError(field, f"must be a finite number, got {_shown(value)}") from None
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
    """One of the string `choices` (a list or dict given instead is refused, not hashed)."""
    if not isinstance(value, str) or value not in choices:
        raise PosencError(field, f"must be one of {sorted(choices)}, got {_shown(value)}")
    return value


def as_mapping(value, field: str) -> dict:
    """A JSON object with string keys, as a new dict (None is an empty one)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise PosencError(field, f"must be an object, got {_shown(value)}")
    if not all(isinstance(key, str) for key in value):
        raise PosencError(field, "keys must be strings")
    return dict(value)


def as_bool(value, field: str) -> bool:
    """true or false (numpy's bool too); 1, "yes" and friends are refused."""
    if not isinstance(value, (bool, np.bool_)):
        raise PosencError(field, f"must be true or false, got {_shown(value)}")
    return bool(value)


def as_positions(positions, field: str = "positions") -> np.ndarray:
    """Positions as a contiguous 1-D float64 array (a scalar becomes one position).

    Integers are exact in float64 up to 2**53, which `LIMITS.max_abs_position` never exceeds, so
    int64 positions within the limit arrive unchanged."""
    try:
        arr = np.asarray(positions)
    except (TypeError, ValueError, OverflowError) as exc:
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
    if not out.size:
        return out
    limit = LIMITS.max_abs_position
    if arr.dtype.kind == "f":
        if not within(out, limit):  # one pass; the details only for the error
            check_positions(out, field)
        return out
    lo, hi = value_range(arr)  # as integers: float64 would round 2^53 + 1 to 2^53 and let it in
    if lo < -limit or hi > limit:
        bad = int(np.flatnonzero((arr < -limit) | (arr > limit))[0])
        raise PositionBeyondLimit(field, bad, int(arr[bad]), limit)
    return out


def check_positions(values: np.ndarray, field: str) -> None:
    """Refuse the first element of a float64 array that is not finite (as such: no limit would admit
    it) or beyond LIMITS.max_abs_position (PositionBeyondLimit, naming the element and the limit)."""
    finite = np.isfinite(values)
    if not finite.all():
        bad = int(np.flatnonzero(~finite)[0])
        raise PosencError(field, f"element {bad} is {float(values[bad])!r}, not finite")
    beyond = np.flatnonzero(np.abs(values) > LIMITS.max_abs_position)
    if beyond.size:
        bad = int(beyond[0])
        raise PositionBeyondLimit(field, bad, float(values[bad]), LIMITS.max_abs_position)


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
    if isinstance(value, (str, bytes, Mapping)) or (
            isinstance(value, (list, tuple)) and any(isinstance(v, (bool, str, bytes)) for v in value)):
        raise PosencError(field, "must be an array of numbers")
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer beyond float range
        raise PosencError(field, "must be an array of numbers") from None
    if arr.shape != (length,):
        raise PosencError(field, f"must have shape ({length},), got {arr.shape}")
    if not np.isfinite(arr).all():
        raise PosencError(field, "must be finite")
    return np.ascontiguousarray(arr)
