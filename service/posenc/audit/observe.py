"""What a cache is, measured from its values alone: layout, storage grid, amplitude, the
frequency of every column and the position of its first row.

Everything here reads the numbers and assumes nothing about the model: the frequencies come
from a least-squares fit of the unwrapped phase atan2(sin, cos) against the row index, on a
contiguous prefix of rows that is grown while the fit stays tight (so a cache broken further
down, e.g. bfloat16 positions above 256, is still measured from its clean rows).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

from ..errors import PosencError
from ..limits import LIMITS

MIN_ROWS = 8
#: Columns that agree to this are copies of one frequency (a layout's duplicate), however they got noisy.
DUPLICATE_TOLERANCE = 1e-2
#: Contiguous rows the frequency fit may use, and sampled rows (log-spaced) checked beyond them.
FIT_ROWS = 4096
SAMPLED_ROWS = 4096
#: Storage grids, coarsest first: (name, numpy dtype, mantissa bits).
GRIDS = (("bfloat16", np.dtype(ml_dtypes.bfloat16), 7), ("float16", np.dtype(np.float16), 10),
         ("float32", np.dtype(np.float32), 23), ("float64", np.dtype(np.float64), 52))
MANTISSA = {name: bits for name, _, bits in GRIDS}
#: The share of sampled rows that may be corrupt (reported by the scan) before the values are not a cache at all.
CORRUPT_FRACTION = 0.01


@dataclass
class Cache:
    """A cos/sin cache as given: cos and sin [n, w] of one dtype, row r holding position start + r."""

    cos: np.ndarray  # any float dtype, possibly a view of a memory-mapped file: read in chunks, never whole
    sin: np.ndarray
    dtype: str  # the dtype the values arrived in ("float32", "bfloat16", ...)
    source: str  # how they arrived: "cos/sin", "cos_sin_cache", "complex", "q rotation (half)", ...
    start: int = 0
    layout: str | None = None  # known already (a q rotation measures it); None = detect from columns
    noise: float | None = None  # the values' own error bound when they are derived (q rotation), not stored


@dataclass
class Observation:
    rows: int
    width: int  # columns as given
    layout: str  # "half" | "interleaved" | "compact"
    n_freq: int
    grid: str  # coarsest storage grid every value lies on
    floor: float  # what a correct cache may differ from the exact values by (its rounding)
    attention: float  # median of sqrt(cos^2 + sin^2)
    omega: np.ndarray  # fitted frequency per column, rad/position
    omega_tol: np.ndarray  # relative uncertainty of each
    offset: float  # fitted position of row 0, relative to Cache.start
    fit_rows: int  # rows the fit used (stops at the first repeated row)
    sample: np.ndarray  # row indices the judgement uses (sampled rows that are not corrupt; the scan sees all)
    cos: np.ndarray  # [len(sample), n_freq] float64, one column per frequency
    sin: np.ndarray
    notes: list[str] = field(default_factory=list)


def _compact(cos: np.ndarray, sin: np.ndarray, layout: str | None) -> tuple[str, np.ndarray, np.ndarray, float]:
    """(layout, cos, sin, mismatch) with one column per frequency: halves [c|c] and pairs [c0 c0 c1 c1 ..]
    folded. Copies that differ by a little (noise added after duplicating) still count, by `mismatch`;
    so do layouts whose copies disagree in a few rows only (corrupt rows: the scan reports them)."""
    w = cos.shape[1]
    if layout is not None or w % 2 or w < 2:
        return layout or "compact", cos, sin, 0.0
    h = w // 2
    views = {"half": (slice(0, h), slice(h, w)), "interleaved": (slice(0, w, 2), slice(1, w, 2))}
    best = None
    for name, (a, b) in views.items():
        with np.errstate(invalid="ignore"):
            per_row = np.maximum(np.abs(cos[:, a] - cos[:, b]).max(axis=1), np.abs(sin[:, a] - sin[:, b]).max(axis=1))
        gap = float(np.quantile(np.where(np.isnan(per_row), np.inf, per_row), 1 - CORRUPT_FRACTION))
        if best is None or gap < best[0]:
            best = (gap, name, a)
    gap, name, a = best
    if gap <= DUPLICATE_TOLERANCE:
        return name, cos[:, a], sin[:, a], gap
    return "compact", cos, sin, 0.0


def storage_grid(*arrays: np.ndarray, dtype: str) -> str:
    """The coarsest dtype whose grid holds every finite value (a float32 file of float16 values says float16)."""
    for name, grid, _ in GRIDS:
        if MANTISSA[name] > MANTISSA.get(dtype, 52):
            break
        with np.errstate(over="ignore"):
            if all(np.array_equal(a[np.isfinite(a)], a[np.isfinite(a)].astype(grid).astype(np.float64))
                   for a in arrays):
                return name
    return dtype if dtype in MANTISSA else "float64"


def sample_rows(n: int) -> np.ndarray:
    head = np.arange(min(n, FIT_ROWS))
    if n <= FIT_ROWS:
        return head
    tail = np.unique(np.geomspace(FIT_ROWS, n - 1, SAMPLED_ROWS).astype(np.int64))
    return np.unique(np.concatenate([head, tail, [n - 1]]))


def _first_repeat(cos: np.ndarray, sin: np.ndarray) -> int:
    """Rows before the first row equal to its predecessor (a correct cache never repeats a row)."""
    same = np.all(cos[1:] == cos[:-1], axis=1) & np.all(sin[1:] == sin[:-1], axis=1)
    hits = np.flatnonzero(same)
    return int(hits[0]) + 1 if hits.size else cos.shape[0]


def _line_fit(phase: np.ndarray, rows: np.ndarray):
    """Per column least squares phase = omega * r + c: (omega, c, max |residual|)."""
    x = rows.astype(np.float64)
    xm = x.mean()
    dx = x - xm
    slope = (dx[:, None] * (phase - phase.mean(axis=0))).sum(axis=0) / (dx * dx).sum()
    intercept = phase.mean(axis=0) - slope * xm
    resid = np.abs(phase - (slope[None, :] * x[:, None] + intercept[None, :])).max(axis=0)
    return slope, intercept, resid


def _wrap(x):
    return (x + np.pi) % (2 * np.pi) - np.pi


def fit_frequencies(phase: np.ndarray, eps: float):
    """(omega, intercept, relative tolerance) per column from the unwrapped prefix phase.

    The window doubles from 16 rows while a column's fit residual stays under a bound set by the
    storage precision; a column whose residual breaks it keeps the fit of its last tight window.
    """
    n = phase.shape[0]
    unwrapped = np.unwrap(phase, axis=0)
    bound = max(50 * eps, 1e-5)
    window = min(n, 16)
    omega, c, resid = _line_fit(unwrapped[:window], np.arange(window))
    used = np.full(phase.shape[1], window)
    while window < n:
        window = min(n, window * 2)
        o, i, r = _line_fit(unwrapped[:window], np.arange(window))
        ok = (r <= bound) & (used * 2 >= window)  # only columns still tight at the previous step
        omega, c, resid, used = (np.where(ok, o, omega), np.where(ok, i, c), np.where(ok, r, resid),
                                 np.where(ok, window, used))
    # 1-sigma slope of a line fit with uniform noise of +-resid over `used` rows, times 3.
    tol = 3 * np.sqrt(12.0) * np.maximum(resid, eps) / used.astype(np.float64) ** 1.5
    return omega, c, tol / np.maximum(np.abs(omega), 1e-300), used


def unwrap_positions(phase: np.ndarray, omega: np.ndarray, prior: np.ndarray) -> np.ndarray:
    """[n] the position each row of phases [n, k] (phase_i = position * omega_i mod 2 pi) stands for, refined
    from the slowest frequency to the fastest, starting at `prior` [n]: each step moves the estimate by less
    than half a turn of its frequency, so the prior must be within pi / omega_slowest of the truth."""
    est = np.array(prior, dtype=np.float64)
    for i in np.argsort(omega):
        if omega[i] > 1e-12:
            est += _wrap(phase[:, i] - omega[i] * est) / omega[i]
    return est


def fit_offset(omega: np.ndarray, intercept: np.ndarray) -> float:
    """The position of row 0: intercept_i = omega_i * offset, unwrapped from the slowest frequency up."""
    return float(unwrap_positions(intercept[None, :], omega, np.zeros(1))[0])


def held_offset(obs: Observation, inv: np.ndarray, start: int, prior: float) -> float:
    """The offset of the rows from start + row under frequencies `inv`: the median of the positions each sampled
    row's phases point to, less its nominal position. Unlike the fitted offset (row 0 of a contiguous prefix)
    this holds when positions were rounded to 16 bits from the first row on (a cache from position 300 in
    bfloat16 repeats every other row): each row points to its own rounded position, and those straddle it."""
    nominal = start + obs.sample.astype(np.float64)
    with np.errstate(invalid="ignore"):
        held = unwrap_positions(np.arctan2(obs.sin, obs.cos), inv, nominal + prior)
    return float(np.median(held - nominal))


def observe(cache: Cache) -> Observation:
    cos, sin = cache.cos, cache.sin
    if cos.ndim != 2 or cos.shape != sin.shape:
        raise PosencError("cache", f"cos and sin must both be [n, d] arrays of one shape, got {cos.shape} and "
                          f"{sin.shape}")
    n, width = cos.shape
    if n < MIN_ROWS or width < 1:
        raise PosencError("cache", f"needs at least {MIN_ROWS} rows and one column, got shape {cos.shape}")
    if width > 2 * LIMITS.max_dim:  # before anything is read: no spec has these frequencies
        raise PosencError("cache", f"{width} columns: a RoPE cache has at most 2 x head_dim ({2 * LIMITS.max_dim}); "
                          "rows are positions and columns dims ([n, d])")
    rows = sample_rows(n)
    layout, c, s, mismatch = _compact(np.asarray(cos[rows], dtype=np.float64), np.asarray(sin[rows], dtype=np.float64),
                                      cache.layout)
    notes = [f"the {layout} copies of each frequency differ by up to {mismatch:.1e}"] if mismatch else []
    cf, sf = c, s
    finite = np.isfinite(cf).all(axis=1) & np.isfinite(sf).all(axis=1)
    if finite.mean() < 1 - CORRUPT_FRACTION:
        raise PosencError("cache", f"{np.sum(~finite)} of {rows.size} sampled rows hold NaN or infinite values")
    grid = "float64" if cache.noise is not None else storage_grid(cf[finite], sf[finite], dtype=cache.dtype)
    amplitude = np.sqrt(cf * cf + sf * sf)
    attention = float(np.median(amplitude[finite]))
    floor = cache.noise if cache.noise is not None else abs(attention) * 2.0 ** -MANTISSA[grid]
    eps = floor / 2
    with np.errstate(invalid="ignore"):
        steady = finite & (np.abs(amplitude / attention - 1) <= 0.05).all(axis=1) if attention > 0 else finite & False
    if attention <= 0 or steady.mean() < 1 - CORRUPT_FRACTION:
        raise PosencError("cache", "cos^2 + sin^2 is not constant: these are not the cos and sin of one angle "
                          "(check which array is which, and that a single array is [cos | sin])")
    prefix = int(np.searchsorted(rows, min(n, FIT_ROWS)))  # the contiguous head of `rows`
    unsteady = np.flatnonzero(~steady[:prefix])
    prefix_ok = int(unsteady[0]) if unsteady.size else prefix
    clean = _first_repeat(cf[:prefix_ok], sf[:prefix_ok])
    if clean < MIN_ROWS < prefix_ok:  # rows repeat from the start (positions rounded from row 0): fit them all
        notes.append(f"row {clean} repeats row {clean - 1}: the frequency fit uses rows 0..{prefix_ok - 1}, "
                     "repeats and all (approximate)")
        clean = prefix_ok
    elif clean < prefix:
        why = f"row {clean} repeats row {clean - 1}" if clean < prefix_ok else f"row {clean} is corrupt"
        notes.append(f"{why}: the frequency fit uses rows 0..{clean - 1}")
    clean = max(clean, MIN_ROWS)
    phase = np.arctan2(sf[:clean], cf[:clean])
    omega, intercept, tol, _ = fit_frequencies(phase, eps * 2)
    if not np.any(np.abs(omega) * clean > 1e-6) and not ((cf != cf[:1]).any() or (sf != sf[:1]).any()):
        raise PosencError("cache", "no column changes along the rows: this is not a position cache (row r must "
                          "hold position start + r)")
    offset = fit_offset(omega, intercept - omega * cache.start)  # relative to the declared start
    return Observation(rows=n, width=width, layout=layout, n_freq=cf.shape[1], grid=grid, floor=floor,
                       attention=attention, omega=omega, omega_tol=tol, offset=offset, fit_rows=clean,
                       sample=rows[steady], cos=cf[steady], sin=sf[steady], notes=notes)
