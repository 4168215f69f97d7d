"""Every row of the cache, streamed: the observation and the judgement look at a sample (a
contiguous head and log-spaced rows beyond it), so a NaN, a flipped sign or a bad copy of a
frequency anywhere else would go unseen. This pass reads the rows in chunks of bounded size
(at most CHUNK_ELEMENTS values per array at a time, whatever the cache's length) and checks,
for every element of every column (both copies of a half or interleaved layout):

* that it can be the cos or sin of an angle: finite, |value| and sqrt(cos^2 + sin^2) within 5% of
  the attention factor (else the row is *corrupt*; smaller excesses are errors a cause must explain);
* that the hypothesis the judgement chose explains it (within `precision.tolerance`), and by how
  much the exact values miss it;
* its error against the values the report compares with (the config's, at the nominal
  positions), for the error-by-position table and the profile.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .observe import Cache, Observation
from .precision import BY_CAUSE, Grounds, exact_cos_sin, tolerance

#: Values per array a chunk holds (float64): 4 MiB each, a handful alive at a time.
CHUNK_ELEMENTS = 1 << 19
#: A row whose sqrt(cos^2 + sin^2) is this far (relative) off the attention factor is corrupt: no rounding of an
#: angle does that (smaller deviations are errors a cause may explain; observe refuses caches where most rows do).
AMPLITUDE_SPREAD = 0.05
#: Rows named in evidence.
SHOWN_ROWS = 5


@dataclass
class Scan:
    rows: int
    against_error: np.ndarray  # [rows] max |cache - compared values| over every column (inf: non-finite)
    exact_error: np.ndarray  # [rows] max |cache - reference exact| (positions with the offset)
    corrupt: dict = field(default_factory=dict)  # what is wrong -> row indices
    violations: np.ndarray = None  # non-corrupt rows the chosen cause does not explain
    residual: float = 0.0  # worst |cache - simulation| over non-corrupt rows
    over: float = 0.0  # worst residual / tolerance over non-corrupt rows

    @property
    def corrupt_rows(self) -> np.ndarray:
        return np.unique(np.concatenate([np.asarray(v, np.int64) for v in self.corrupt.values()])) \
            if self.corrupt else np.zeros(0, np.int64)


def column_map(obs: Observation) -> np.ndarray:
    """For every column as given, the frequency it holds."""
    if obs.width == obs.n_freq:
        return np.arange(obs.width)
    if obs.layout == "half":
        return np.arange(obs.width) % obs.n_freq
    return np.arange(obs.width) // 2


def _rows(mask: np.ndarray, lo: int) -> np.ndarray:
    return np.flatnonzero(mask) + lo


class _Work:
    """Buffers of one chunk, allocated once per scan and written in place: fresh pages cost more than the
    arithmetic (DESIGN.md, "fresh pages are expensive"), so nothing [rows, width]-sized is allocated per chunk."""

    def __init__(self, rows: int, width: int):
        self.c, self.s, self.t1, self.t2 = (np.empty((rows, width)) for _ in range(4))

    def error(self, ref_c: np.ndarray, ref_s: np.ndarray, cols: np.ndarray, r: int) -> np.ndarray:
        """t1[:r] = max(|c - ref_c|, |s - ref_s|) element by element, ref expanded to every column."""
        t1, t2 = self.t1[:r], self.t2[:r]
        np.take(ref_c, cols, axis=1, out=t1)
        np.take(ref_s, cols, axis=1, out=t2)
        np.subtract(self.c[:r], t1, out=t1)
        np.subtract(self.s[:r], t2, out=t2)
        np.abs(t1, out=t1)
        np.abs(t2, out=t2)
        np.maximum(t1, t2, out=t1)  # NaN propagates
        return t1

    def amplitude_off(self, a: float, r: int) -> np.ndarray:
        """max over columns of |sqrt(c^2 + s^2) - a| per row."""
        t1, t2 = self.t1[:r], self.t2[:r]
        np.multiply(self.c[:r], self.c[:r], out=t1)
        np.multiply(self.s[:r], self.s[:r], out=t2)
        np.add(t1, t2, out=t1)
        np.sqrt(t1, out=t1)
        np.subtract(t1, a, out=t1)
        np.abs(t1, out=t1)
        return t1.max(axis=1)


def _row_max(t: np.ndarray) -> np.ndarray:
    out = t.max(axis=1)
    return np.where(np.isnan(out), np.inf, out)


def scan(cache: Cache, obs: Observation, grounds: Grounds, offset: float, cause: str,
         against: tuple[np.ndarray, float] | None) -> Scan:
    """Check every row against the `cause` simulation of `grounds` at positions start + offset + row;
    `against` (inv, attention) gives the values the error table compares with at the nominal positions
    (None: the reference's exact values)."""
    n, width = cache.cos.shape
    cols = column_map(obs)
    hyp = BY_CAUSE[cause]
    a = abs(grounds.attention)
    same_against = against is None or (offset == 0 and against[0] is grounds.inv and against[1] == grounds.attention)
    chunk = max(1, min(n, CHUNK_ELEMENTS // max(width, 1)))
    work = _Work(chunk, width)
    against_error, exact_error = np.empty(n), np.empty(n)
    kinds = {"non-finite values": [], "values beyond the attention factor": [],
             "cos^2 + sin^2 off the attention factor squared": []}
    violations, residual, over = [], 0.0, 0.0
    for lo in range(0, n, chunk):
        hi = min(n, lo + chunk)
        r = hi - lo
        c, s = work.c[:r], work.s[:r]
        np.copyto(c, cache.cos[lo:hi], casting="unsafe")
        np.copyto(s, cache.sin[lo:hi], casting="unsafe")
        with np.errstate(invalid="ignore", over="ignore"):
            np.add(c, s, out=work.t1[:r])
            finite = np.isfinite(work.t1[:r]).all(axis=1)
            off = finite & (work.amplitude_off(a, r) > AMPLITUDE_SPREAD * a)
        beyond = np.zeros(r, bool)
        if off.any():  # rarely: which of the unsteady rows hold a value beyond the factor itself
            rows = np.flatnonzero(off)
            beyond[rows] = np.maximum(np.abs(c[rows]), np.abs(s[rows])).max(axis=1) > a * (1 + AMPLITUDE_SPREAD)
        for kind, mask in zip(kinds, (~finite, beyond, off & ~beyond)):
            kinds[kind].append(_rows(mask, lo))
        good = finite & ~off
        nominal = cache.start + np.arange(lo, hi, dtype=np.float64)
        positions = nominal + offset
        exact_c, exact_s = exact_cos_sin(positions, grounds.inv, grounds.attention)
        tol = tolerance(hyp, positions, grounds.inv, grounds.attention, grounds.floor)
        with np.errstate(invalid="ignore"):
            if not same_against:
                ac, as_ = exact_cos_sin(nominal, against[0], against[1])
                against_error[lo:hi] = _row_max(work.error(ac, as_, cols, r))
            exact_error[lo:hi] = _row_max(work.error(exact_c, exact_s, cols, r))
            if same_against:
                against_error[lo:hi] = exact_error[lo:hi]
            if cause != "correct":  # the exact values' error is in t1 already; else the simulation's
                resid = grounds.residual(cause, positions, lambda c2, s2, r=r: work.error(c2, s2, cols, r))
            else:
                resid = work.t1[:r]
            if good.any():
                residual = max(residual, float(resid[good].max()))
            np.divide(resid, np.take(tol, cols, axis=1, out=work.t2[:r]), out=resid)
            ratio = resid.max(axis=1)
        if good.any():
            over = max(over, float(ratio[good].max()))
        violations.append(_rows(good & ~(ratio <= 1), lo))
    corrupt = {k: np.concatenate(v) for k, v in kinds.items()}
    return Scan(n, against_error, exact_error, {k: v for k, v in corrupt.items() if v.size},
                np.concatenate(violations), residual, over)


def shown(rows: np.ndarray) -> str:
    """'70001' / '70001, 70002, ... and 3 more' for evidence."""
    head = ", ".join(str(int(r)) for r in rows[:SHOWN_ROWS])
    return head + (f" and {rows.size - SHOWN_ROWS} more" if rows.size > SHOWN_ROWS else "")
