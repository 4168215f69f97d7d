"""posenc.alibi_*: slopes, bias blocks and uint8-quantised slopes."""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from .. import crmath
from ..args import as_choice, as_float, as_int, as_vector
from ..dtypes import cast_output, kernel_dtype, output_dtype
from ..kernels import MODES
from ..kernels.active import alibi_bias_rows, run_rows
from ..errors import PosencError
from ..limits import LIMITS
from ..encodings.alibi import slopes as _slopes


def alibi_slopes(n_heads, *, variant="paper", alibi_bias_max=8) -> np.ndarray:
    """Per-head slopes float64[n_heads] in the reference's order (non-powers of two included).

    variant: "paper" (Press et al.), "bloom" (float32 pow), "mpt" (next power of two,
    alibi_bias_max), "falcon" (bloom rounded to bfloat16), "baichuan" (paper rounded to float32)."""
    return _slopes(n_heads, variant, alibi_bias_max)


LN2 = 0.6931471805599453  # ln 2 rounded to float64

#: Largest |gamma|: slope * gamma * distance stays finite in float32 for any allowed offsets.
MAX_GAMMA = 1e6


def _gamma(gamma, n_heads: int) -> np.ndarray:
    if isinstance(gamma, numbers.Real) and not isinstance(gamma, bool):
        return np.full(n_heads, as_float(gamma, "gamma", minimum=-MAX_GAMMA, maximum=MAX_GAMMA))
    out = as_vector(gamma, "gamma", n_heads)
    if np.abs(out).max(initial=0.0) > MAX_GAMMA:
        raise PosencError("gamma", f"entries must be within +-{MAX_GAMMA:g}")
    return out


def alibi_bias(n_heads, q_len, k_len=None, *, q_offset=0, k_offset=0, mode="causal", gamma=1.0,
               variant="paper", dtype="float32", alibi_bias_max=8) -> np.ndarray:
    """The bias block [n_heads, q_len, k_len] for queries q_offset.. and keys k_offset..

    mode "causal": -m(i-j) for j <= i, -inf above the diagonal; "symmetric": -m|i-j|;
    "bloom": m*j (key position only; equal to causal per row up to a constant, so the same
    softmax). Offsets let a caller take one block of a huge matrix without the rest.
    `gamma` (a number or one per head) multiplies the slopes, e.g. for event-aware modulation.
    """
    slopes = alibi_slopes(n_heads, variant=variant, alibi_bias_max=alibi_bias_max)
    q_len = as_int(q_len, "q_len", minimum=1)
    k_len = q_len if k_len is None else as_int(k_len, "k_len", minimum=1)
    dtype = output_dtype(dtype)
    LIMITS.check_output((slopes.shape[0], q_len, k_len), dtype.itemsize, field="q_len")  # before any allocation
    limit = LIMITS.max_abs_position
    q_offset = as_int(q_offset, "q_offset", minimum=-limit, maximum=limit - q_len)
    k_offset = as_int(k_offset, "k_offset", minimum=-limit, maximum=limit - k_len)
    q_pos = np.arange(q_offset, q_offset + q_len, dtype=np.float64)
    k_pos = np.arange(k_offset, k_offset + k_len, dtype=np.float64)
    return alibi_bias_positions(slopes * _gamma(gamma, slopes.shape[0]), q_pos, k_pos, mode, dtype)


def alibi_bias_positions(slopes: np.ndarray, q_pos: np.ndarray, k_pos: np.ndarray, mode: str,
                         dtype: np.dtype) -> np.ndarray:
    """Bias for arbitrary validated query/key positions (also used by rope_alibi)."""
    mode = as_choice(mode, "mode", MODES)
    shape = (slopes.shape[0], q_pos.shape[0], k_pos.shape[0])
    LIMITS.check_output(shape, dtype.itemsize, field="q_len")
    out = np.empty(shape, dtype=kernel_dtype(dtype))
    run_rows(alibi_bias_rows, q_pos.shape[0], shape[0] * shape[2], slopes, q_pos, k_pos, MODES[mode], out)
    return cast_output(out, dtype)


@dataclass(frozen=True)
class QuantizedSlopes:
    """Slopes as uint8 codes in the log domain: slope = 2 ** (-code * step).

    ALiBi slopes are powers of two spread over exponents (0, e_max], so a linear code of the
    exponent spends its 256 levels evenly over every head. The rounding moves the exponent by
    at most step/2, so the relative error of a slope is at most 2**(step/2) - 1
    (`max_relative_error`): 1.09% for the default e_max = 8, step = 8/255. The exponents and
    powers go through posenc.crmath, so codes and decoded slopes are the same on every CPU.
    """

    codes: np.ndarray
    step: float

    def dequantize(self) -> np.ndarray:
        return crmath.pow_each(2.0, -self.codes.astype(np.float64) * self.step)

    @property
    def max_relative_error(self) -> float:
        return crmath.pow(2.0, self.step / 2) - 1.0


def alibi_slopes_uint8(n_heads, *, variant="paper", alibi_bias_max=8) -> QuantizedSlopes:
    """uint8-quantised slopes (see QuantizedSlopes for the decoding and its error bound)."""
    slopes = alibi_slopes(n_heads, variant=variant, alibi_bias_max=alibi_bias_max)
    exponents = np.array([-crmath.log(s) / LN2 for s in slopes.tolist()])
    e_max = max(float(exponents.max()), 8.0 if variant != "mpt" else float(alibi_bias_max))
    step = e_max / 255.0
    codes = np.clip(np.rint(exponents / step), 0, 255).astype(np.uint8)
    return QuantizedSlopes(codes=codes, step=step)


__all__ = ["QuantizedSlopes", "alibi_bias", "alibi_bias_positions", "alibi_slopes", "alibi_slopes_uint8"]
