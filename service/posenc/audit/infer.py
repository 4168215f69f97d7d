"""The RoPE spec a cache was built with, from its fitted frequencies alone (no config).

The high frequencies are left alone by every scaling variant but linear, so a line through
ln(omega_i) against i over the top quarter gives the base (slope) and any uniform factor
(intercept). The ratio of every frequency to the default at that base then says which variant
it is: all ones (default), one constant (linear), ones then a ramp down to 1/factor (YaRN or
Llama-3, told apart by trying their usual trained lengths), or anything else (per-frequency
factors, as LongRoPE). The simplest candidate that reproduces every frequency wins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..encodings import RopeSpec
from ..errors import PosencError

#: Every framework keeps inv_freq in float32: a frequency that close to the spec's reproduces it.
FLOAT32_INV_FREQ = 1e-6
#: How far (relative) a fitted base may be from a round one that is tried when nothing reproduces the frequencies.
LOOSE_BASE = 0.02
#: Trained lengths tried for YaRN and Llama-3 when there is no config.
TRAINED_LENGTHS = (2048, 4096, 8192, 16384, 32768, 65536)
#: Llama-3 (low_freq_factor, high_freq_factor) pairs tried.
LLAMA3_FACTORS = ((1.0, 4.0), (1.0, 2.0), (2.0, 8.0))


@dataclass(frozen=True)
class Inferred:
    spec: RopeSpec
    score: float  # max over columns of |ln(omega / inv)| / tolerance; <= 1 reproduces every frequency
    description: str
    simplest: Inferred | None = None  # when this is the per-frequency last resort: the best simple spec, whose
    # frequencies a rounding of inv_freq (bfloat16 buffers) may have moved off the fit


def nice_base(base: float) -> float:
    """Snap to the 2-significant-digit value (5e5, 1e4, 1e6 ...) when the fit is that close."""
    if not math.isfinite(base) or base <= 1:
        return base
    nice = float(f"{base:.2g}")
    return nice if abs(base / nice - 1) < 2e-3 else base


def match_score(omega: np.ndarray, tol: np.ndarray, inv: np.ndarray) -> float:
    if inv.shape != omega.shape:
        return math.inf
    with np.errstate(divide="ignore", invalid="ignore"):
        err = np.abs(np.log(np.abs(omega) / inv))
    err = np.where(np.isfinite(err), err, math.inf)
    return float(np.max(err / np.maximum(tol, FLOAT32_INV_FREQ)))


def _candidate(omega, tol, description, head_dim, base, scaling=None, original=None):
    try:
        spec = RopeSpec(head_dim, base=base, scaling=scaling, original_max_position_embeddings=original)
    except PosencError:
        return None
    return Inferred(spec, match_score(omega, tol, spec.inv_freq()[0]), description)


def fit_base(omega: np.ndarray) -> tuple[float, float]:
    """(base, uniform factor) from the top quarter of the frequencies."""
    k = omega.shape[0]
    d = 2 * k
    top = np.arange(max(2, k // 4 + 1))
    top = top[top < k]
    top = top[omega[top] > 0]
    if top.size < 2:
        return 10000.0, 1.0
    slope, intercept = np.polyfit(2.0 * top / d, np.log(omega[top]), 1)
    base = math.exp(min(-slope, 700.0))
    return (nice_base(base), math.exp(-intercept)) if base > 1 else (10000.0, 1.0)


def infer_spec(omega: np.ndarray, tol: np.ndarray) -> Inferred:
    """The simplest spec that reproduces the fitted frequencies (the last resort: per-frequency factors)."""
    k = omega.shape[0]
    head_dim = 2 * k
    base, uniform = fit_base(omega)
    default_inv = 1.0 / base ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    with np.errstate(divide="ignore"):
        ratio = default_inv / np.abs(omega)  # the per-frequency divisor
    factor = float(np.max(ratio))
    tried = [_candidate(omega, tol, f"default, base {base:g}", head_dim, base)]
    if abs(uniform - 1) > 1e-3:
        f = nice_base(uniform)
        tried.append(_candidate(omega, tol, f"linear x{f:g}", head_dim, base,
                                {"rope_type": "linear", "factor": f}))
    if factor > 1.01:
        f = nice_base(factor)
        for length in TRAINED_LENGTHS:
            tried.append(_candidate(omega, tol, f"yarn x{f:g}, trained length {length}", head_dim, base,
                                    {"rope_type": "yarn", "factor": f}, length))
            for low, high in LLAMA3_FACTORS:
                tried.append(_candidate(omega, tol, f"llama3 x{f:g}, trained length {length}", head_dim, base,
                                        {"rope_type": "llama3", "factor": f, "low_freq_factor": low,
                                         "high_freq_factor": high}, length))
    tried = [t for t in tried if t is not None]
    if not tried:
        raise PosencError("cache", f"{k} frequencies per row: no RoPE spec has that many (head_dim {head_dim})")
    best = min(tried, key=lambda t: t.score)
    if best.score <= 1:
        return best
    factors = [float(x) for x in np.clip(ratio, 1e-6, 1e12)]
    per_freq = _candidate(omega, tol, "per-frequency factors (LongRoPE-like)", head_dim, base,
                          {"rope_type": "longrope", "long_factor": factors, "short_factor": factors, "factor": 1.0},
                          TRAINED_LENGTHS[0])
    if per_freq is None or per_freq.score >= best.score:
        return best
    return Inferred(per_freq.spec, per_freq.score, per_freq.description, _rounded_base(best, omega, tol) or best)


def _rounded_base(best: Inferred, omega: np.ndarray, tol: np.ndarray) -> Inferred | None:
    """The best simple spec at the round base near its fit: frequencies rounded to 16 bits move the fitted
    base by up to ~1% (too far for `nice_base`), and the round one is what the model was built with."""
    fitted = best.spec.base
    for digits in (1, 2):
        nice = float(f"{fitted:.{digits - 1}e}")
        if abs(fitted / nice - 1) <= LOOSE_BASE and nice != fitted:
            spec = best.spec
            return _candidate(omega, tol, best.description.replace(f"{fitted:g}", f"{nice:g}"), spec.head_dim, nice,
                              None if spec.rope_type == "default" else spec.scaling,
                              spec.original_max_position_embeddings)
    return None
