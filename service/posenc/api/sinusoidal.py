"""posenc.sinusoidal: absolute sinusoidal encodings for any positions."""

from __future__ import annotations

import numpy as np

from ..args import as_positions
from ..dtypes import cast_output, kernel_dtype, output_dtype
from ..errors import PositionBeyondLimit
from ..limits import LIMITS
from ..encodings import SinusoidalSpec
from ._tables import cast_exact, checked_out, constant_amplitude, fill_sincos, fill_sincos_crc32c


def sinusoidal(positions, dim, *, base=10000.0, layout="interleaved", min_timescale=1.0, max_timescale=None,
               scale=None, dtype="float32", target_std=None, offset=0) -> np.ndarray:
    """Sinusoidal position encodings, shape [len(positions), dim].

    layout: "interleaved" (Vaswani/DistilBERT/XLM), "halves" (Marian: [sin|cos], Vaswani
    frequencies) or "t2t" (tensor2tensor/fairseq/M2M100/Whisper/TimesFM timescales, zero
    column when dim is odd). Positions may be fractional. `scale` multiplies column j by
    scale[j]; `target_std` rescales the table to that RMS (e.g. 0.02 to match embeddings).
    `offset` gives position p the row of p + offset (M2M100: padding_idx + 1).
    Angles are float64; the result is cast once to `dtype`.
    """
    spec = SinusoidalSpec(dim, base=base, layout=layout, min_timescale=min_timescale,
                          max_timescale=max_timescale, scale=scale, target_std=target_std, offset=offset)
    return sinusoidal_table(as_positions(positions), spec, output_dtype(dtype))


def sinusoidal_table(positions: np.ndarray, spec: SinusoidalSpec, dtype: np.dtype, out=None) -> np.ndarray:
    """Rows of `spec` for validated float64 positions; `out` (C-contiguous [n, dim] of the kernel
    dtype, at any address: checked_out) may be preallocated."""
    LIMITS.check_output((positions.shape[0], spec.dim), dtype.itemsize)
    positions = shifted(positions, spec.offset)
    fresh = out is None
    if fresh:
        out = np.empty((positions.shape[0], spec.dim), dtype=kernel_dtype(dtype))
    else:
        checked_out(out, (positions.shape[0], spec.dim), dtype)
    amplitude, plan = constant_amplitude(spec.n_sin, spec.amplitude), spec.column_plan()
    fill_sincos(positions, spec.freqs, amplitude, out.reshape(-1), plan, fresh=fresh)
    if spec.layout == "t2t" and spec.dim % 2:
        out[:, -1] = 0.0
    if spec.scale is not None:  # per-column factors: a second pass, off the common path, rounded from float64
        out *= np.asarray(spec.scale, dtype=out.dtype)
        return cast_output(out, dtype)
    return cast_exact(out, dtype, spec.freqs, amplitude, plan.sources(spec.n_sin, spec.dim),
                      lambda r, c: float(positions[r]))


def sinusoidal_rows_crc32c(positions: np.ndarray, spec: SinusoidalSpec, out: np.ndarray, crc: int) -> int | None:
    """sinusoidal_table's rows into `out` (C-contiguous float32/float64) with the CRC-32C of
    their bytes continuing `crc`, in one pass (fill_sincos_crc32c). None, with nothing
    written, where the kernel's output is not the final bytes (a t2t zero column, `scale`)
    or the fused kernel is unavailable: the caller then fills and checksums."""
    if spec.scale is not None or (spec.layout == "t2t" and spec.dim % 2):
        return None
    return fill_sincos_crc32c(shifted(positions, spec.offset), spec.freqs,
                              constant_amplitude(spec.n_sin, spec.amplitude), out.reshape(-1), spec.column_plan(), crc)


def shifted(positions: np.ndarray, offset: int) -> np.ndarray:
    """positions + offset, still within LIMITS.max_abs_position. Checked before adding, against
    limit - offset (exact): a sum near 2^53 may round (2^53 - 1 + 2 becomes 2^53) and pass a check
    after it. Positions are >= -limit already and the offset is >= 0, so only the top can be crossed."""
    if not offset:
        return positions
    top = LIMITS.max_abs_position - offset
    if positions.size and float(positions.max()) > top:
        bad = int(np.flatnonzero(positions > top)[0])
        position = float(positions[bad])
        moved = int(position) + offset if position.is_integer() else position + offset  # exact when it can be
        raise PositionBeyondLimit("positions", bad, moved, LIMITS.max_abs_position,
                                  f"plus offset {offset} is")
    return positions + float(offset)
