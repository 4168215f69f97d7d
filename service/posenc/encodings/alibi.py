"""ALiBi slopes in closed form, reproducing each reference's stored values.

* paper: 2^(-8h/p) for the p = 2^floor(log2 n) first heads, then 2^(-4(2k-1)/p) appended
  (float64, the paper's Python floats).
* bloom: the same rule in float32 `pow` (differs from float32(paper) by an ulp for n >= 12).
* mpt: next power of two P, 2^(-k*alibi_bias_max/P) in float32, odd-then-even reorder.
Every pow is correctly rounded (posenc.crmath; the float32 ones rounded once from the exact
value), so the slopes are the same bits on every CPU and C library.
* falcon: bloom's slopes rounded to bfloat16 (Falcon multiplies in bf16).
* baichuan: the paper's float64 slopes rounded to float32 (Baichuan's remote code builds
  `torch.Tensor(_get_interleave(n))`), so `slope * position` is one float32 rounding of the
  product of the float32 slope, as its float32 multiply gives.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from .. import crmath
from ..args import as_choice, as_float, as_int
from ..errors import PosencError
from ..limits import LIMITS
from .canonical import Canonical

VARIANTS = ("paper", "bloom", "mpt", "falcon", "baichuan")
#: Largest alibi_bias_max: MPT forms 2^(k*alibi_bias_max/P) in float32, finite and normal below 2^127.
MAX_BIAS_MAX = 126.0


def _paper(n: int) -> np.ndarray:
    p = 1 << (n.bit_length() - 1)  # 2^floor(log2 n)
    first = crmath.pow_each(2.0, -8.0 * np.arange(1, p + 1) / p)
    extra = crmath.pow_each(2.0, -4.0 * (2 * np.arange(1, n - p + 1) - 1) / p)
    return np.concatenate([first, extra])


def _powf_each(base: np.float32, exponents: np.ndarray) -> np.ndarray:
    """float32 base ** e for each float32 e, each rounded once to float32 (torch's float32 pow)."""
    return np.array([crmath.powf(base, e) for e in exponents.tolist()], dtype=np.float32)


def _bloom(n: int) -> np.ndarray:
    p = 1 << (n.bit_length() - 1)
    base = np.float32(crmath.pow(2.0, -8.0 / p))  # BLOOM: 2 ** (-(2 ** -(log2(p) - 3))) in Python floats
    slopes = _powf_each(base, np.arange(1, p + 1, dtype=np.float32))
    if p != n:
        extra_base = np.float32(crmath.pow(2.0, -4.0 / p))
        odd = np.arange(1, 2 * min(p, n - p), 2, dtype=np.float32)
        slopes = np.concatenate([slopes, _powf_each(extra_base, odd)])
    return slopes.astype(np.float64)


def _mpt(n: int, bias_max: float) -> np.ndarray:
    p = 1 << (n - 1).bit_length()  # 2^ceil(log2 n)
    exponent = np.arange(1, p + 1, dtype=np.float32) * np.float32(bias_max / p)
    slopes = np.float32(1.0) / _powf_each(np.float32(2.0), exponent)
    if p != n:
        slopes = np.concatenate([slopes[1::2], slopes[0::2]])[:n]
    return slopes.astype(np.float64)


def slopes(n_heads, variant="paper", alibi_bias_max=8) -> np.ndarray:
    n = as_int(n_heads, "n_heads", minimum=1, maximum=LIMITS.max_dim)
    variant = as_choice(variant, "variant", VARIANTS)
    bias_max = as_float(alibi_bias_max, "alibi_bias_max", exclusive_minimum=0.0, maximum=MAX_BIAS_MAX)
    if variant != "mpt" and bias_max != 8:
        raise PosencError("alibi_bias_max", f"only applies to variant 'mpt', not {variant!r}")
    if variant == "paper":
        return _paper(n)
    if variant == "bloom":
        return _bloom(n)
    if variant == "falcon":
        return _bloom(n).astype(ml_dtypes.bfloat16).astype(np.float64)
    if variant == "baichuan":
        return _paper(n).astype(np.float32).astype(np.float64)
    return _mpt(n, bias_max)


@dataclass(frozen=True, init=False)
class AlibiSpec(Canonical):
    """ALiBi heads as a position-indexed table: row p = slopes * p (BLOOM's form, m_h * key
    position). Per query row it differs from the causal bias -m(i-j) by the constant m*i, so
    the softmax is the same; the causal bias of (i, j) is row(j) - row(i)."""

    KIND = "alibi"  # the "kind" of to_dict(), a table's encoding
    POSITIONAL = "n_heads"
    KEYWORDS = ("variant", "alibi_bias_max")

    n_heads: int
    variant: str = "paper"
    alibi_bias_max: float = 8.0

    def __init__(self, n_heads, *, variant="paper", alibi_bias_max=8):
        slopes(n_heads, variant, alibi_bias_max)  # validates all three
        object.__setattr__(self, "n_heads", int(n_heads))
        object.__setattr__(self, "variant", variant)
        object.__setattr__(self, "alibi_bias_max", float(alibi_bias_max))

    @property
    def slopes(self) -> np.ndarray:
        return slopes(self.n_heads, self.variant, self.alibi_bias_max)

    def to_dict(self) -> dict:
        return {"kind": self.KIND, "n_heads": self.n_heads, "variant": self.variant,
                "alibi_bias_max": self.alibi_bias_max}
