"""`posenc bench native`: the native SIMD core per code path, one core, float32.

Cases: a 131072x128 and a 1,048,576x128 sinusoidal table, and RoPE cos/sin for 131072
positions at head_dim 128 (the [2, n, 64] buffer rope_cos_sin fills), each for contiguous
positions (angle addition from the absolute split of integer positions) and for shuffled
fractional positions (one vectorised sincos per value). Baselines in the same run: the numba
kernel, the textbook numpy code and libc `memset` of the same bytes (the physical limit). Two bandwidths per row: into a
pre-faulted buffer (the kernel itself) and into fresh pages (np.empty + kernel, what a
new array costs: first-touch page faults are about as expensive as the compute), each also as a
fraction of memset into the same kind of pages. "exact fallback": the fraction of the table's
float32 elements whose float64 value does not decide their rounding (the same on every path).
"""

from __future__ import annotations

import ctypes
import statistics
import time
from dataclasses import dataclass, field

import numpy as np

from .. import native, reference
from ..api.rope import rope_table
from ..api.sinusoidal import sinusoidal_table
from ..encodings import RopeSpec, SinusoidalSpec
from ..encodings.columns import ColumnPlan
from ..kernels import sincos_rows
from .tables import textbook_rope, textbook_sinusoidal
from .timing import fallback_fraction, machine_line, markdown_table

DIM = 128
SAMPLE_ROWS = 4096  # rows checked against the float64 oracle (the whole 1M-row oracle would need GBs)


@dataclass
class Case:
    """One table: its frequencies and layout, the textbook code, the float64 oracle, and its rows
    in float64 through the API with their amplitude (the exact-fallback fraction's input)."""

    label: str
    n: int
    freqs: np.ndarray
    plan: ColumnPlan
    shape: tuple[int, ...]
    textbook: object
    oracle: object  # positions -> rows (float64) in the layout of the flat buffer, for sampled rows
    rows64: object  # positions -> the same values as float64 table rows (posenc's kernels)
    amp: float

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * 4


def sinusoidal_case(n: int) -> Case:
    spec = SinusoidalSpec(DIM)
    return Case(f"sinusoidal {n}x{DIM}", n, spec.freqs, spec.column_plan(), (n, DIM),
                lambda: textbook_sinusoidal(n, DIM), lambda p: reference.sinusoidal(p, DIM),
                lambda p: sinusoidal_table(p, spec, np.dtype(np.float64)), spec.amplitude)


def rope_case(n: int) -> Case:
    spec = RopeSpec(DIM, base=500000.0)
    inv, attention = spec.inv_freq()
    n_freq = inv.shape[0]
    plan = ColumnPlan(row_stride=n_freq, sin_base=n * n_freq, cos_base=0, interleaved=False, n_cos=n_freq)

    def oracle(p):
        cos, sin = reference.rope_cos_sin(p, inv)
        return np.stack([cos, sin])

    return Case(f"RoPE cos+sin {n}x{n_freq}x2", n, inv, plan, (2, n, n_freq), lambda: textbook_rope(n, inv), oracle,
                lambda p: rope_table(p, spec, dtype="float64"), attention)


def add_arguments(parser) -> None:
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per row, median reported")


def _kernels() -> dict[str, object]:
    """label -> fill(positions, freqs, amp, flat, plan): every runnable native path, then numba."""
    out = {}
    for isa in native.available_isas():
        kernels = native.kernels_for(isa)
        out[f"native {isa}"] = lambda pos, freqs, amp, flat, plan, k=kernels: k.sincos_rows(
            pos, freqs, amp, flat, plan, 0, pos.shape[0])
    out["numba"] = lambda pos, freqs, amp, flat, plan: sincos_rows(
        pos, freqs, amp, flat, plan.row_stride, plan.sin_base, plan.cos_base, plan.interleaved,
        plan.n_cos, 0, pos.shape[0])
    return out


def memset(flat: np.ndarray) -> None:
    """libc memset over the buffer, with a non-zero byte: zero fills can take faster paths."""
    ctypes.memset(flat.ctypes.data, 0x3F, flat.nbytes)


def _max_error(case: Case, positions: np.ndarray, table: np.ndarray) -> float:
    """Max |table - oracle| over the first, last and evenly spread sampled rows."""
    rows = np.unique(np.concatenate([np.arange(SAMPLE_ROWS // 2), case.n - 1 - np.arange(SAMPLE_ROWS // 4),
                                     np.linspace(0, case.n - 1, SAMPLE_ROWS // 4).astype(np.int64)]))
    got = table.reshape(case.shape)
    got = got[:, rows] if len(case.shape) == 3 else got[rows]
    return float(np.abs(got.astype(np.float64) - case.oracle(positions[rows])).max())


@dataclass
class Job:
    label: str
    positions: str  # "contiguous", "shuffled fractional" or "" (memset)
    pages: str  # "pre-faulted" or "fresh"
    fn: object
    rounds: int  # slow jobs run in fewer rounds
    samples: list[float] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return statistics.median(self.samples)


def _interleaved(jobs: list[Job], repeats: int) -> None:
    """Time every job once per round, round after round: on a noisy (shared, virtual)
    machine each job and its memset baseline then see the same background load."""
    for job in jobs:
        if job.rounds == repeats:
            job.fn()  # warm-up: caches, numba's dispatcher
    for r in range(repeats):
        for job in jobs:
            if r < job.rounds:
                t0 = time.perf_counter()
                job.fn()
                job.samples.append(time.perf_counter() - t0)


def _measure(case: Case, repeats: int) -> tuple[list[list[str]], list[str]]:
    """The table rows for one case, and its lines against the targets."""
    positions = np.arange(case.n, dtype=np.float64)
    shuffled = np.random.default_rng(0).permutation(positions) + 0.5
    amp = np.ones(case.freqs.shape[0])
    flat = np.ones(case.shape, dtype=np.float32).reshape(-1)  # pre-faulted: every page touched once
    few = max(1, repeats // 2)

    def fresh(fill):
        return lambda: fill(np.empty(case.shape, dtype=np.float32).reshape(-1))

    jobs = [Job("libc memset (the limit)", "", "pre-faulted", lambda: memset(flat), repeats),
            Job("libc memset (the limit)", "", "fresh", fresh(memset), repeats)]
    for label, kernel in _kernels().items():
        def fill(out, k=kernel, p=positions):
            k(p, case.freqs, amp, out, case.plan)
        jobs += [Job(label, "contiguous", "pre-faulted", lambda f=fill: f(flat), repeats),
                 Job(label, "contiguous", "fresh", fresh(fill), repeats),
                 Job(label, "shuffled fractional", "pre-faulted", lambda f=fill: f(flat, p=shuffled), few)]
    jobs.append(Job("textbook numpy (float32 angles)", "contiguous", "fresh", case.textbook, few))
    _interleaved(jobs, repeats)

    by_key = {(job.label, job.positions, job.pages): job for job in jobs}
    limit, fresh_limit, text = jobs[0], jobs[1], jobs[-1]
    fallback = {kind: f"{fallback_fraction(case.rows64, p, case.amp):.2e}"
                for kind, p in (("contiguous", positions), ("shuffled fractional", shuffled))}
    rows, best = [], {}
    for label, kind in dict.fromkeys((job.label, job.positions) for job in jobs):
        pre, new = by_key.get((label, kind, "pre-faulted")), by_key.get((label, kind, "fresh"))
        shown = pre or new
        error = ""
        if kind:  # memset has no values to check
            table = np.asarray(case.textbook()) if shown is text else _fill_once(shown, flat)
            error = f"{_max_error(case, shuffled if kind.startswith('shuffled') else positions, table):.1e}"
        gbps = case.nbytes / shown.seconds / 1e9
        rows.append([case.label, label, kind, f"{shown.seconds * 1e3:.2f}",
                     f"{case.nbytes / pre.seconds / 1e9:.2f}" if pre else "—",
                     f"{case.nbytes / new.seconds / 1e9:.2f}" if new else "—", f"{limit.seconds / shown.seconds:.0%}",
                     f"{fresh_limit.seconds / new.seconds:.0%}" if new else "—",
                     f"{text.seconds / shown.seconds:.0f}x", error,
                     fallback[kind] if label.startswith(("native", "numba")) else ""])
        if label.startswith("native") and gbps > best.get(kind, (0.0,))[0]:
            best[kind] = (gbps, label, limit.seconds / shown.seconds, text.seconds / shown.seconds)
    targets = []
    if "contiguous" in best:
        gbps, label, of_memset, speedup = best["contiguous"]
        targets.append(f"- {case.label}, contiguous: best {label} at {gbps:.1f} GB/s = {of_memset:.0%} of memset "
                       f"(target >= 50%), {speedup:.0f}x the textbook code (target >= 50x)")
        gbps, label, _, _ = best["shuffled fractional"]
        targets.append(f"- {case.label}, shuffled fractional: best {label} at {gbps:.2f} GB/s (target >= 1 GB/s)")
    return rows, targets


def _fill_once(job: Job, flat: np.ndarray) -> np.ndarray:
    """Run a pre-faulted job once more so `flat` holds its output (the error check's input)."""
    job.fn()
    return flat


def run(args) -> str:
    rows, targets = [], []
    for case in (sinusoidal_case(131072), sinusoidal_case(1 << 20), rope_case(131072)):
        case_rows, case_targets = _measure(case, args.repeats)
        rows += case_rows
        targets += case_targets
    table = markdown_table(["table", "implementation", "positions", "ms (median)", "GB/s pre-faulted",
                            "GB/s fresh pages", "vs memset", "vs fresh-page memset", "vs textbook",
                            "max abs error vs float64", "exact fallback"], rows)
    summary = "\n".join(targets) or f"- native library unavailable: {native.STATUS}"
    return (f"{table}\n\n{summary}\n\nOne core, float32 output, one run, median of {args.repeats} rounds (shuffled "
            f"and textbook: {max(1, args.repeats // 2)}), every job timed once per round so all see the same "
            "background load; 'vs memset' and 'vs textbook' use the pre-faulted figure where there is one, "
            "'vs fresh-page memset' the fresh-pages one (a new array against memset into new pages). Exact "
            "fallback: the fraction of float32 elements whose float64 value does not decide their rounding. "
            f"Machine: {machine_line()}; CPU features: {native.cpu_features() or 'unknown'}.\n")
