"""posenc.rope_*: inverse frequencies, cos/sin caches and rotation of q/k."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from ..args import as_choice, as_float, as_positions
from ..dtypes import OUTPUT_DTYPES, cast_output, kernel_dtype, output_dtype
from ..encodings import RopeSpec
from ..encodings.columns import ColumnPlan
from ..encodings.rope import ARRANGEMENTS, LAYOUTS, seq_len_for
from ..errors import PosencError
from ..kernels.active import rope_rotate_rows, run_rows, xpos_decay_rows
from ..limits import LIMITS
from ._memo import bytes_lru
from ._tables import PlannedRows, SincosRows, cast_exact, constant_amplitude, fill_cos_sin_pair, fill_sincos_crc32c


def as_rope_spec(spec, field: str = "spec") -> RopeSpec:
    return RopeSpec.coerce(spec, field)


@bytes_lru(8 << 20)
def _inv_freq_cached(spec: RopeSpec, seq_len: float | None) -> tuple[np.ndarray, float]:
    inv, attention = spec.inv_freq(seq_len)
    inv.flags.writeable = False
    return inv, attention


def _frequencies(spec: RopeSpec, positions: np.ndarray, seq_len) -> tuple[np.ndarray, float]:
    """inv_freq for this call: length-dependent variants use seq_len, else max(positions)+1."""
    if not spec.length_dependent:
        if seq_len is not None:
            as_float(seq_len, "seq_len", exclusive_minimum=0.0)
        return _inv_freq_cached(spec, None)
    return _inv_freq_cached(spec, seq_len_for(positions, seq_len))


def rope_inv_freq(spec, *, seq_len=None) -> tuple[np.ndarray, float]:
    """(inv_freq float64[n_freq], attention_factor) as the reference formula, exact in float64.

    For "dynamic" and "longrope" the result depends on `seq_len` only (None = at init:
    max_position_embeddings for dynamic, short factors for longrope)."""
    spec = as_rope_spec(spec)
    seq_len = None if seq_len is None else as_float(seq_len, "seq_len", exclusive_minimum=0.0)
    inv, attention = _inv_freq_cached(spec, seq_len)
    return inv.copy(), attention


def as_rope_positions(positions, spec: RopeSpec) -> np.ndarray:
    """1-D positions, or for an M-RoPE spec also [3, n] (temporal, height, width) as float64.

    1-D positions with an M-RoPE spec are text tokens: every axis at the same position, as
    HF's `position_ids.expand(3, -1, -1)`."""
    try:
        ndim = np.ndim(positions)
    except (TypeError, ValueError):  # ragged nested lists
        raise PosencError("positions", "must be a 1-D array of numbers, or [3, n] for M-RoPE") from None
    if ndim != 2:
        return as_positions(positions)
    if spec.mrope_section is None:
        raise PosencError("positions", "2-D positions are M-RoPE [3, n] (temporal, height, width), "
                          "which needs a spec with mrope_section")
    arr = np.asarray(positions)
    if arr.shape[0] != 3:
        raise PosencError("positions", f"M-RoPE positions must have shape [3, n], got {list(arr.shape)}")
    return as_positions(arr.reshape(-1)).reshape(3, -1)


def _cos_sin(positions: np.ndarray, spec: RopeSpec, inv: np.ndarray, attention: float, dtype):
    """(cos, sin) [n, n_freq]; for [3, n] M-RoPE positions each frequency chunk takes its axis's
    angles (float64 position * inv_freq, the same kernel), as HF's recomposition_frequencies."""
    if positions.ndim == 1:
        return fill_cos_sin_pair(positions, inv, attention, dtype)
    n = positions.shape[1]
    cos, sin = np.empty((n, inv.shape[0]), dtype=dtype), np.empty((n, inv.shape[0]), dtype=dtype)
    for first, end, axis in spec.mrope_chunks:
        if end > first:
            cos[:, first:end], sin[:, first:end] = fill_cos_sin_pair(
                positions[axis], np.ascontiguousarray(inv[first:end]), attention, dtype)
    return cos, sin


def rope_cos_sin(positions, spec, *, seq_len=None, dtype="float32", arrangement="freq"
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(cos, sin), attention factor applied to both as HF does: each [n, n_freq] by default, or
    [n, 2*n_freq] as a rotary module hands them to attention with `arrangement` "cat" (Llama:
    the halves duplicated) or "interleave" (Cohere: each value twice); see ARRANGEMENTS.

    positions: 1-D, or [3, n] (temporal, height, width) for an M-RoPE spec (`mrope_section`).
    seq_len=None for dynamic/longrope means max(positions)+1, what a fresh HF module uses."""
    as_choice(arrangement, "arrangement", ARRANGEMENTS)
    spec = as_rope_spec(spec)
    positions = as_rope_positions(positions, spec)
    out_dtype = output_dtype(dtype)
    inv, attention = _frequencies(spec, positions, seq_len)
    n = positions.shape[-1]
    LIMITS.check_output((2, n, inv.shape[0] * ARRANGEMENTS[arrangement]), out_dtype.itemsize)
    cos, sin = _cos_sin(positions, spec, inv, attention, kernel_dtype(out_dtype))
    return (arrange(_cast_exact(cos, out_dtype, positions, spec, inv, attention, True), arrangement),
            arrange(_cast_exact(sin, out_dtype, positions, spec, inv, attention, False), arrangement))


def _cast_exact(values: np.ndarray, dtype: np.dtype, positions: np.ndarray, spec: RopeSpec, inv: np.ndarray,
                attention: float, cosine: bool) -> np.ndarray:
    """rope_cos_sin's cos or sin [n, n_freq] as `dtype`, each value the exact one rounded once
    (cast_exact); for M-RoPE, column i's positions are its chunk's axis."""
    n_freq = inv.shape[0]
    axis = np.zeros(n_freq, dtype=np.int64)
    if positions.ndim == 2:
        for first, end, chunk_axis in spec.mrope_chunks:
            axis[first:end] = chunk_axis
    rows = positions if positions.ndim == 2 else positions[None, :]
    return cast_exact(values, dtype, inv, constant_amplitude(n_freq, attention),
                      (np.arange(n_freq), np.full(n_freq, cosine)), lambda r, c: float(rows[axis[c], r]))


def arrange(values: np.ndarray, arrangement: str) -> np.ndarray:
    """cos or sin [..., n_freq] laid out as `arrangement` (ARRANGEMENTS) over the last axis."""
    as_choice(arrangement, "arrangement", ARRANGEMENTS)
    if arrangement == "cat":
        return np.concatenate([values, values], axis=-1)
    if arrangement == "interleave":
        return np.repeat(values, 2, axis=-1)
    return values


def arrange_rows(rows: np.ndarray, arrangement: str) -> np.ndarray:
    """Rows [..., 2*n_freq] = [cos | sin] with each half laid out as `arrangement`: [cos' | sin']."""
    if arrangement == "freq":
        return rows
    half = rows.shape[-1] // 2
    return np.concatenate([arrange(rows[..., :half], arrangement), arrange(rows[..., half:], arrangement)], axis=-1)


def rope_table(positions, spec, *, seq_len=None, dtype="float32", out=None) -> np.ndarray:
    """Rows [cos(p w_0..) | sin(p w_0..)] of width 2*n_freq: the layout of RoPE tables in
    shared memory and on the wire. `out` (C-contiguous [n, 2*n_freq] of `dtype`'s kernel dtype:
    float32, or float64 for the others; at any address) may be preallocated, e.g. a shared-memory
    segment; anything else is refused (PosencError naming `out`)."""
    spec = as_rope_spec(spec)
    positions = as_positions(positions)
    inv, attention = _frequencies(spec, positions, seq_len)
    return _rope_rows(positions, inv, attention, output_dtype(dtype), out)


def rope_table_at(positions: np.ndarray, spec: RopeSpec, seq_len: float | None, dtype: np.dtype,
                  out=None) -> np.ndarray:
    """rope_table rows with the frequencies at `seq_len` exactly, None meaning the init values
    (what a table of a length-dependent spec stores): never max(positions) + 1, so a row does
    not depend on which other positions are computed with it (a table is built in blocks)."""
    return rope_rows_at(spec, seq_len, dtype)(positions, out)


@bytes_lru(8 << 20)
def rope_rows_at(spec: RopeSpec, seq_len: float | None, dtype: np.dtype) -> SincosRows:
    """rope_table_at's rows function for one (spec, seq_len, dtype): frequencies, attention
    factor and [cos | sin] layout bound once."""
    return _rows_function(*_inv_freq_cached(spec, seq_len), dtype)


def _rope_rows(positions: np.ndarray, inv: np.ndarray, attention: float, out_dtype: np.dtype,
               out=None) -> np.ndarray:
    return _rows_function(inv, attention, out_dtype)(positions, out)


def rope_planned_rows(spec: RopeSpec, seq_len: float | None, dtype: np.dtype) -> PlannedRows:
    """rope_rows_at's rows on a native plan of its own (a named computed table's: see PlannedRows)."""
    inv, attention = _inv_freq_cached(spec, seq_len)
    return PlannedRows(inv, constant_amplitude(inv.shape[0], attention), _table_columns(inv.shape[0]), dtype)


def _rows_function(inv: np.ndarray, attention: float, dtype: np.dtype) -> SincosRows:
    """The [cos | sin] rows of these frequencies, each scaled by the attention factor, as `dtype`."""
    return SincosRows(inv, constant_amplitude(inv.shape[0], attention), _table_columns(inv.shape[0]), dtype)


def rope_rows_crc32c(positions: np.ndarray, spec: RopeSpec, seq_len: float | None, out: np.ndarray,
                     crc: int) -> int | None:
    """rope_table_at's rows into `out` with the CRC-32C of their bytes continuing `crc`, in one
    pass (fill_sincos_crc32c); None, with nothing written, without the fused kernel."""
    inv, attention = _inv_freq_cached(spec, seq_len)
    return fill_sincos_crc32c(positions, inv, constant_amplitude(inv.shape[0], attention), out.reshape(-1),
                              _table_columns(inv.shape[0]), crc)


@lru_cache(maxsize=64)
def _table_columns(n_freq: int) -> ColumnPlan:
    """The [cos | sin] row layout of RoPE tables, n_freq of each."""
    return ColumnPlan(row_stride=2 * n_freq, sin_base=n_freq, cos_base=0, interleaved=False, n_cos=n_freq)


def xpos_scale(positions, spec, *, center=0.0) -> np.ndarray:
    """xPos decay [n, n_freq]: zeta_i^((p-center)/xpos_scale_base), zeta_i=(2i+0.4d)/(1.4d).
    Multiply q by it and divide k by it; q.k then decays with |m-n| only."""
    spec = as_rope_spec(spec)
    if spec.xpos_scale_base is None:
        raise PosencError("xpos_scale_base", "is not set on this spec")
    positions = as_positions(positions)
    d = spec.rotary_dim
    zeta = (np.arange(0, 2 * spec.n_freq, 2, dtype=np.float64) + 0.4 * d) / (1.4 * d)
    center = as_float(center, "xpos_center")
    with np.errstate(over="ignore"):  # a tiny scale base overflows here; the check below names it
        power = (positions - center) / spec.xpos_scale_base
    out = np.empty((positions.shape[0], zeta.shape[0]))
    run_rows(xpos_decay_rows, positions.shape[0], zeta.shape[0], zeta, power, out)
    if out.size and not (np.isfinite(out).all() and out.min() > 0):
        raise PosencError("positions", "are too far from xpos_center for this xpos_scale_base: the xPos decay "
                          "over- or underflows float64")
    return out


def rope_apply(x, positions, spec, *, layout=None, seq_len=None, xpos_role="q", xpos_center=0.0) -> np.ndarray:
    """Rotate x [..., n, head_dim] by the positions' angles; returns a new array of x's dtype.

    layout "half" (NeoX/Llama rotate_half) or "interleaved" (GPT-J/RoFormer pairs); None uses
    spec.layout ("half" unless the spec came from an interleaved model's config). Partial
    rotary rotates the first 2*n_freq dims and passes the rest. With spec.xpos_scale_base
    set, q (xpos_role="q") is multiplied by the xPos decay and k ("k") divided by it.
    Math is float64 per element; float16/bfloat16 inputs are widened, then rounded once.
    positions may be [3, n] (temporal, height, width) for an M-RoPE spec (`mrope_section`).
    """
    spec = as_rope_spec(spec)
    layout = as_choice(spec.layout if layout is None else layout, "layout", LAYOUTS)
    xpos_role = as_choice(xpos_role, "xpos_role", ("q", "k"))
    try:
        x = np.asarray(x)
    except (TypeError, ValueError):
        raise PosencError("x", "must be a numeric array") from None
    if x.dtype not in OUTPUT_DTYPES.values():
        raise PosencError("x", f"dtype must be one of {sorted(OUTPUT_DTYPES)}, got {x.dtype}")
    if x.ndim < 2 or x.shape[-1] != spec.head_dim:
        raise PosencError("x", f"must have shape [..., n, {spec.head_dim}], got {x.shape}")
    positions = as_rope_positions(positions, spec)
    n = x.shape[-2]
    if positions.shape[-1] != n:
        raise PosencError("positions", f"has {positions.shape[-1]} entries but x has {n} rows (axis -2)")
    LIMITS.check_output(x.shape, x.dtype.itemsize, field="x")
    inv, attention = _frequencies(spec, positions, seq_len)
    cos, sin = _cos_sin(positions, spec, inv, attention, np.float64)
    if spec.xpos_scale_base is not None:
        scale = xpos_scale(positions, spec, center=xpos_center)
        if xpos_role == "k":
            scale = 1.0 / scale
        cos *= scale
        sin *= scale
    batch = math.prod(x.shape[:-2])  # not reshape(-1, ...): with n = 0 the batch size is not implied
    x3 = np.ascontiguousarray(x.reshape(batch, n, spec.head_dim), dtype=kernel_dtype(x.dtype))
    out = np.empty_like(x3)
    run_rows(rope_rotate_rows, n, x3.shape[0] * spec.head_dim, x3, cos, sin, layout == "interleaved", out)
    return cast_output(out.reshape(x.shape), x.dtype)
