"""q before and after the user's rotation -> the cos/sin cache it applied, and the pairing it used.

Rotating a pair (a, b) by angle t with attention factor A gives (a', b') = A (a cos t - b sin t,
b cos t + a sin t), so with z = a + ib the ratio z'/z = A e^{it}. Averaged over heads with
weights |z|^2 (sum conj(z) z' / sum |z|^2) the error of the estimate is at most the relative
rounding of q_rot, however small some entries of q are. The right pairing ("half": i with
i + d/2, "interleaved": 2i with 2i + 1) is the one under which |z'| / |z| is the same for every
pair; the trailing dims q_rot leaves untouched are the pass-through of partial rotary.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from ..errors import PosencError
from .observe import Cache

_MANTISSA = {np.dtype(np.float64): 52, np.dtype(np.float32): 23, np.dtype(np.float16): 10,
             np.dtype(ml_dtypes.bfloat16): 7}


def _pairs(width: int, layout: str) -> tuple[np.ndarray, np.ndarray]:
    if layout == "half":
        return np.arange(width // 2), np.arange(width // 2, width)
    return np.arange(0, width, 2), np.arange(1, width, 2)


def _norm_spread(z: np.ndarray, zr: np.ndarray) -> float:
    big = np.abs(z) > 1e-3 * np.abs(z).max()
    ratio = np.abs(zr[big]) / np.abs(z[big])
    return float(np.median(np.abs(ratio / np.median(ratio) - 1)))


def cache_from_rotation(q: np.ndarray, q_rot: np.ndarray, start: int = 0) -> Cache:
    if q.shape != q_rot.shape or q.ndim < 2:
        raise PosencError("q_rot", f"q and q_rot must have one shape [..., n, head_dim], got {q.shape} and "
                          f"{q_rot.shape}")
    dtype = np.dtype(q_rot.dtype) if q_rot.dtype.kind != "c" else None
    if dtype not in _MANTISSA:
        raise PosencError("q_rot", f"dtype must be float64, float32, float16 or bfloat16, got {q_rot.dtype}")
    n, head_dim = q.shape[-2], q.shape[-1]
    batch = math.prod(q.shape[:-2])  # not reshape(-1, ...): an empty q does not imply the batch size
    x = np.asarray(q, dtype=np.float64).reshape(batch, n, head_dim)
    y = np.asarray(q_rot, dtype=np.float64).reshape(batch, n, head_dim)
    changed = np.flatnonzero(np.any(x != y, axis=(0, 1)))
    width = int(changed.max()) + 1 if changed.size else 0
    width += width % 2
    if width < 2:
        raise PosencError("q_rot", "equals q: nothing was rotated")
    best = None
    for layout in ("half", "interleaved"):
        i, j = _pairs(width, layout)
        z, zr = x[..., i] + 1j * x[..., j], y[..., i] + 1j * y[..., j]
        spread = _norm_spread(z, zr)
        if best is None or spread < best[0]:
            best = (spread, layout, z, zr)
    spread, layout, z, zr = best
    if spread > 0.01:
        raise PosencError("q_rot", "is not a rotation of q under either pairing (half or interleaved): "
                          f"|z'|/|z| varies by {spread:.1%}")
    weight = (np.abs(z) ** 2).sum(axis=0)
    if np.any(weight == 0):
        raise PosencError("q", "a (position, pair) is zero in every head: its rotation cannot be measured")
    w = (np.conj(z) * zr).sum(axis=0) / weight
    amplitude = float(np.median(np.abs(w)))
    noise = 4.0 * amplitude * 2.0 ** -_MANTISSA[dtype]
    name = "bfloat16" if dtype == np.dtype(ml_dtypes.bfloat16) else dtype.name
    return Cache(w.real.copy(), w.imag.copy(), name, f"q rotation ({layout} pairs, {width} of {head_dim} dims)",
                 start, layout=layout, noise=noise)
