"""When a float64 sin/cos value decides its float32 (or 16-bit) rounding, and when it does not.

Every sin/cos value the kernels compute in float64 (native/src/vsincos.h and kernels_body.h,
kernels/trig.py: the same operations on every path) lies within SINCOS_ERROR * |amp| of the
exact amp * sin(p * w) (docs/exactness.md, "Correct rounding", proves the bound). Rounding to
nearest is monotonic, so where y - E and y + E (E that bound) round to the same float32, every
number between them does, the exact value too: that float32 is the exact value rounded once. Where
they do not (about 5e-6 of the values of a table, and every value within ~2^-24 of zero), the
value is recomputed exactly (posenc.crmath.sincos_rounded in Python, posenc_crtrig.h in C).
"""

from __future__ import annotations

import numpy as np

#: |y - amp * sin(p w)| <= SINCOS_ERROR * |amp| for every float64 sin/cos value y the kernels
#: compute: the proven bound is 14 * 2^-53 (docs/library.md, "Correct rounding"); 2^-48 = 32 * 2^-53
#: leaves room for the rounding of y +- E itself (at most 2^-53 |amp|) and for part sincos twice
#: as far off as the proof assumes (still 25 * 2^-53). A wider E only sends more values to the
#: exact path (2^-46 sent 1.6x as many values of a RoPE table: 125 against 78).
SINCOS_ERROR = 2.0**-48


def ambiguous(values: np.ndarray, amp: np.ndarray | float, dtype) -> np.ndarray:
    """Which float64 kernel values `values` (amplitudes `amp`, broadcast against them) do not
    decide their rounding to `dtype` (float32, float16 or bfloat16): y - E and y + E round to
    different bit patterns (NaN: decided)."""
    from ..dtypes import cast_output, output_dtype  # noqa: PLC0415  dtypes imports the kernels

    dtype = output_dtype(dtype)
    bits = np.dtype(f"u{dtype.itemsize}")
    error = SINCOS_ERROR * np.abs(np.asarray(amp, dtype=np.float64))
    with np.errstate(over="ignore", invalid="ignore"):
        low, high = cast_output(values - error, dtype), cast_output(values + error, dtype)
    return (low.view(bits) != high.view(bits)) & ~np.isnan(values)  # bit patterns, as the kernels: -0 != +0
