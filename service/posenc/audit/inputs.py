"""Arrays in, a `Cache` out: .npy, .npz and .safetensors bytes read without trusting them, and
the shapes frameworks keep their caches in told apart.

Accepted (by tensor names when there are names, else by shape):
  * cos and sin: two arrays [n, d] or [n, d/2] (names containing "cos" and "sin", or the order given);
  * one array [2, n, w] (cos stacked on sin), a complex [n, d/2] (Meta's freqs_cis), or one real
    [n, 2k] read as [cos | sin] (vLLM's cos_sin_cache, posenc's own table rows);
  * q before and after rotation: names "q" and "q_rot" (or "before" and "after"), [..., n, head_dim].
Headers are checked against the bytes that follow before anything is allocated, so a lying
header is an error, never a large allocation.
"""

from __future__ import annotations

import io
import json
import struct
import zipfile

import ml_dtypes
import numpy as np

from ..errors import PosencError
from ..npyfile import parse_npy
from .observe import Cache
from .rotation import cache_from_rotation

#: Most arrays one input may hold, and most elements in all of them.
MAX_ARRAYS = 8
MAX_ELEMENTS = 1 << 27
_SAFETENSORS_DTYPES = {"F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"),
                       "BF16": np.dtype(ml_dtypes.bfloat16), "C64": np.dtype("<c8")}


def _count(shape) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    if n > MAX_ELEMENTS:
        raise PosencError("file", f"an array of shape {tuple(shape)} is over the limit of {MAX_ELEMENTS} elements")
    return n


def read_npy(data: bytes, field: str = "file") -> np.ndarray:
    try:
        arr = parse_npy(data)
    except ValueError as exc:
        raise PosencError(field, str(exc)) from None
    _count(arr.shape)
    return arr


def read_npz(data: bytes, field: str = "file") -> dict[str, np.ndarray]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        members = archive.infolist()
        if len(members) > MAX_ARRAYS:
            raise PosencError(field, f".npz holds {len(members)} arrays; at most {MAX_ARRAYS}")
        total = sum(m.file_size for m in members)
        if total > 8 * MAX_ELEMENTS:
            raise PosencError(field, f".npz unpacks to {total} bytes, over the limit")
        return {m.filename.removesuffix(".npy"): read_npy(archive.read(m), f"{field}.{m.filename}")
                for m in members}
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError) as exc:
        raise PosencError(field, f"not a valid .npz file: {exc}") from None


def read_safetensors(data: bytes, field: str = "file") -> dict[str, np.ndarray]:
    if len(data) < 8:
        raise PosencError(field, "not a safetensors file (shorter than its 8-byte header length)")
    (size,) = struct.unpack("<Q", data[:8])
    if size > min(len(data) - 8, 1 << 20):
        raise PosencError(field, f"safetensors header length {size} does not fit the file")
    try:
        header = json.loads(data[8:8 + size])
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PosencError(field, f"safetensors header is not JSON: {exc}") from None
    if not isinstance(header, dict):
        raise PosencError(field, "safetensors header must be a JSON object")
    header.pop("__metadata__", None)
    if len(header) > MAX_ARRAYS:
        raise PosencError(field, f"holds {len(header)} tensors; at most {MAX_ARRAYS}")
    body = memoryview(data)[8 + size:]
    out = {}
    for name, info in header.items():
        where = f"{field}.{name}"
        if not isinstance(info, dict) or not isinstance(info.get("shape"), list) or \
                not all(isinstance(s, int) and s >= 0 for s in info["shape"]):
            raise PosencError(where, "needs a dtype, a shape of non-negative ints and data_offsets")
        dtype = _SAFETENSORS_DTYPES.get(info.get("dtype"))
        if dtype is None:
            raise PosencError(where, f"dtype {info.get('dtype')!r} is not one of {sorted(_SAFETENSORS_DTYPES)}")
        offsets = info.get("data_offsets")
        count = _count(info["shape"])
        if (not isinstance(offsets, list) or len(offsets) != 2 or not all(isinstance(o, int) for o in offsets)
                or not 0 <= offsets[0] <= offsets[1] <= len(body) or offsets[1] - offsets[0] != count * dtype.itemsize):
            raise PosencError(where, f"data_offsets {offsets!r} do not hold shape {info['shape']} of {dtype}")
        out[name] = np.frombuffer(body[offsets[0]:offsets[1]], dtype=dtype).reshape(info["shape"])
    return out


def read_arrays(data: bytes, field: str = "file") -> dict[str, np.ndarray]:
    """The named arrays in one file's bytes, whatever of the three formats it is (by its magic)."""
    if data[:6] == b"\x93NUMPY":
        return {field: read_npy(data, field)}
    if data[:4] == b"PK\x03\x04":
        return read_npz(data, field)
    if len(data) >= 9 and data[8:9] == b"{":
        return read_safetensors(data, field)
    raise PosencError(field, "is not a .npy, .npz or .safetensors file")


def _float(arr: np.ndarray, field: str) -> np.ndarray:
    if arr.dtype.kind not in "fc" and arr.dtype != np.dtype(ml_dtypes.bfloat16):
        raise PosencError(field, f"dtype must be floating point (or complex), got {arr.dtype}")
    return arr


def _dtype_name(arr: np.ndarray) -> str:
    return "bfloat16" if arr.dtype == np.dtype(ml_dtypes.bfloat16) else arr.dtype.name


def _pick(arrays: dict, *names: str) -> str | None:
    for key in arrays:
        low = key.lower()
        if any(low == n or low.endswith("." + n) or low.endswith("_" + n) for n in names):
            return key
    return None


def _named(arrays: dict, word: str, avoid: str) -> str | None:
    hits = [k for k in arrays if word in k.lower() and avoid not in k.lower()]
    return hits[0] if len(hits) == 1 else None


def to_cache(arrays: dict[str, np.ndarray], start: int = 0) -> Cache:
    """Interpret named arrays as a cos/sin cache (or as q before/after rotation, measured into one)."""
    if not arrays:
        raise PosencError("file", "holds no arrays")
    before, after = _pick(arrays, "q", "before"), _pick(arrays, "q_rot", "q_rotated", "after")
    if before is not None and after is not None and before != after:
        return cache_from_rotation(_float(arrays[before], before), _float(arrays[after], after), start)
    cos_key, sin_key = _named(arrays, "cos", "sin"), _named(arrays, "sin", "cos")
    if cos_key and sin_key:
        return _pair(arrays[cos_key], arrays[sin_key], "cos/sin", start)
    if len(arrays) == 2:
        first, second = arrays.values()
        return _pair(first, second, "cos/sin (in the order given)", start)
    if len(arrays) != 1:
        raise PosencError("file", f"cannot tell cos from sin among {sorted(arrays)}: name them cos and sin")
    (name, arr), = arrays.items()
    arr = _float(arr, name)
    if arr.dtype.kind == "c":
        if arr.ndim != 2:
            raise PosencError(name, f"a complex cache (freqs_cis) must be [n, d/2], got {arr.shape}")
        return Cache(arr.real, arr.imag, _dtype_name(arr.real), "complex", start)  # views: read in chunks
    if arr.ndim == 3 and arr.shape[0] == 2:
        return _pair(arr[0], arr[1], "[cos, sin] stacked", start)
    if arr.ndim == 2 and arr.shape[1] % 2 == 0:
        half = arr.shape[1] // 2
        return _pair(arr[:, :half], arr[:, half:], "[cos | sin] (cos_sin_cache)", start)
    raise PosencError(name, f"shape {arr.shape}: give cos and sin as two arrays, a [2, n, d] stack, a complex "
                      "[n, d/2] or one [n, 2k] [cos | sin] array")


def _pair(cos: np.ndarray, sin: np.ndarray, source: str, start: int) -> Cache:
    cos, sin = _float(cos, "cos"), _float(sin, "sin")
    if cos.shape != sin.shape or cos.ndim != 2:
        raise PosencError("cache", f"cos and sin must be [n, d] of one shape, got {cos.shape} and {sin.shape}")
    if cos.dtype != sin.dtype:
        raise PosencError("sin", f"dtype {sin.dtype} differs from cos's {cos.dtype}")
    return Cache(cos, sin, _dtype_name(cos), source, start)
