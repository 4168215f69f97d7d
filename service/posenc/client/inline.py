"""ENCODE_SPEC aux blocks: any sinusoidal or RoPE spec as frequencies + amplitude + column plan.

The client does all the spec math (RoPE scaling variants, t2t timescales, attention factors)
with the same code as the library, so the server only evaluates sin/cos and rows come out
in the library's layouts: sinusoidal rows as `posenc.sinusoidal`, RoPE rows as
`[cos | sin]` (`posenc.tables` / `rope_table`).
"""

from __future__ import annotations

import numpy as np

from ..api.rope import as_rope_spec, rope_inv_freq
from ..errors import PosencError
from ..encodings import RopeSpec, SinusoidalSpec
from ..encodings.columns import ColumnPlan
from ..encodings.rope import seq_len_for
from .protocol import SPEC_PREFIX, SpecFlag


def _pack(freqs: np.ndarray, amplitude: float, plan: ColumnPlan, width: int, *, zero_last: bool = False,
          scale=None) -> bytes:
    flags = (SpecFlag.INTERLEAVED if plan.interleaved else 0) | (SpecFlag.ZERO_LAST if zero_last else 0)
    if scale is not None:
        flags |= SpecFlag.COLUMN_SCALE
    sin_base, cos_base = (0, 0) if plan.interleaved else (plan.sin_base, plan.cos_base)
    prefix = SPEC_PREFIX.pack(len(freqs), width, sin_base, cos_base, plan.n_cos, flags, float(amplitude))
    parts = [prefix, np.ascontiguousarray(freqs, dtype="<f8").tobytes()]
    if scale is not None:
        parts.append(np.asarray(scale, dtype="<f8").tobytes())
    return b"".join(parts)


def sinusoidal_aux(spec: SinusoidalSpec) -> bytes:
    return _pack(spec.freqs, spec.amplitude, spec.column_plan(), spec.dim,
                 zero_last=spec.layout == "t2t" and spec.dim % 2 == 1, scale=spec.scale)


def rope_aux(spec: RopeSpec, seq_len: float | None) -> bytes:
    """[cos | sin] rows of width 2*n_freq, the attention factor applied to both halves."""
    inv_freq, attention = rope_inv_freq(spec, seq_len=seq_len)
    return _cos_sin_aux(inv_freq, attention)


def _cos_sin_aux(freqs: np.ndarray, attention: float) -> bytes:
    n = len(freqs)
    plan = ColumnPlan(row_stride=2 * n, sin_base=n, cos_base=0, interleaved=False, n_cos=n)
    return _pack(freqs, attention, plan, 2 * n)


def mrope_auxes(spec: RopeSpec, positions: np.ndarray, seq_len=None) -> list[tuple[int, int, int, bytes]]:
    """M-RoPE as the inline plan expresses it: one ENCODE_SPEC per frequency chunk of
    `spec.mrope_section`, (first, end, axis, aux), each [cos | sin] of its own frequencies for its
    axis's positions (`positions[axis]` of [3, n]); `mrope_rows` puts the replies together."""
    if spec.length_dependent:
        seq_len = seq_len_for(np.asarray(positions, dtype=np.float64).reshape(-1), seq_len)
    inv_freq, attention = rope_inv_freq(spec, seq_len=seq_len)
    return [(first, end, axis, _cos_sin_aux(inv_freq[first:end], attention))
            for first, end, axis in spec.mrope_chunks if end > first]


def mrope_rows(spec: RopeSpec, chunks: list[tuple[int, int]], replies: list[np.ndarray]) -> np.ndarray:
    """[n, 2*n_freq] = [cos | sin] from the chunk replies of `mrope_auxes` (a copy, no arithmetic)."""
    n_freq, first_reply = spec.n_freq, replies[0]
    out = np.empty((first_reply.shape[0], 2 * n_freq), dtype=first_reply.dtype)
    for (first, end), rows in zip(chunks, replies):
        size = end - first
        out[:, first:end], out[:, n_freq + first:n_freq + end] = rows[:, :size], rows[:, size:]
    return out


def spec_aux(spec, positions: np.ndarray | None = None, seq_len=None) -> bytes:
    """The aux block for `spec` (SinusoidalSpec, RopeSpec or a RoPE dict). For RoPE variants whose
    frequencies depend on the length (dynamic, longrope), seq_len=None means max(positions)+1,
    as `posenc.rope_cos_sin` does."""
    if isinstance(spec, SinusoidalSpec):
        if seq_len is not None:
            raise PosencError("seq_len", "only applies to rope specs")
        return sinusoidal_aux(spec)
    spec = as_rope_spec(spec)
    if spec.length_dependent:
        values = np.asarray(positions if positions is not None else [], dtype=np.float64)
        seq_len = seq_len_for(values, seq_len)
    return rope_aux(spec, seq_len)
