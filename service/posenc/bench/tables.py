"""`posenc bench tables`: sinusoidal and RoPE cos/sin tables, one core, float32.

Baselines in the same run: the textbook numpy code (the one in every tutorial, float32
angles), `ndarray.fill` of the same bytes (the memory write bandwidth, the ceiling) and
`np.empty(...).fill` (fresh pages: what a new array costs at the least). "exact fallback" is
the fraction of the table's float32 elements whose float64 value does not decide their rounding
(posenc.kernels.rounding.ambiguous). A second table writes into `out` buffers starting 0, 16,
32 and 48 bytes past a cache line (numpy's own big arrays start at +16): every offset should
run as fast as the aligned one.
"""

from __future__ import annotations

import math
import statistics
import time

import numpy as np

from .. import native, reference
from ..api.rope import rope_cos_sin, rope_table
from ..api.sinusoidal import sinusoidal_table
from ..kernels import set_threads, threads
from ..encodings import RopeSpec, SinusoidalSpec
from .timing import buffer_at, fallback_fraction, machine_line, markdown_table, measure

N_ROWS = 131072
DIM = 128
OFFSETS = (0, 16, 32, 48)  # bytes past a 64-byte line


def textbook_sinusoidal(n: int, d: int) -> np.ndarray:
    position = np.arange(n, dtype=np.float32)[:, None]
    div_term = np.exp(np.arange(0, d, 2, dtype=np.float32) * np.float32(-math.log(10000.0) / d))
    pe = np.zeros((n, d), dtype=np.float32)
    pe[:, 0::2] = np.sin(position * div_term)
    pe[:, 1::2] = np.cos(position * div_term)
    return pe


def textbook_rope(n: int, inv_freq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    freqs = np.outer(np.arange(n, dtype=np.float32), inv_freq.astype(np.float32))
    return np.cos(freqs), np.sin(freqs)


def add_arguments(parser) -> None:
    parser.add_argument("--rows", type=int, default=N_ROWS, help="positions per table (default %(default)s)")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs of each row; medians are reported "
                        "(default %(default)s)")


def run(args) -> str:
    n, repeats = args.rows, args.repeats
    previous_threads = threads()
    set_threads(1)
    try:
        return _run(n, repeats)
    finally:
        set_threads(previous_threads)


def _max_error(actual, expected) -> str:
    return f"{np.abs(np.asarray(actual, np.float64) - expected).max():.1e}"


def _run(n: int, repeats: int) -> str:
    positions = np.arange(n, dtype=np.float64)
    nbytes = n * DIM * 4
    rows = []

    spec = SinusoidalSpec(DIM)
    f32, f64 = np.dtype(np.float32), np.dtype(np.float64)
    buffer = np.empty((n, DIM), dtype=np.float32)
    oracle = reference.sinusoidal(positions, DIM)
    fill = measure("memory write bandwidth (`ndarray.fill`, preallocated)", lambda: buffer.fill(1.0), nbytes,
                   repeats=repeats)
    fresh_fill = measure("fresh pages + write (`np.empty(...).fill`)",
                         lambda: np.empty((n, DIM), dtype=np.float32).fill(1.0), nbytes, repeats=repeats)
    cases = [
        measure("posenc.sinusoidal (new array)", lambda: sinusoidal_table(positions, spec, f32), nbytes,
                repeats=repeats),
        measure("posenc.sinusoidal (into preallocated `out`)", lambda: sinusoidal_table(positions, spec, f32, buffer),
                nbytes, repeats=repeats),
    ]
    textbook = measure("textbook numpy (float32 angles)", lambda: textbook_sinusoidal(n, DIM), nbytes,
                       repeats=repeats)
    errors = {cases[0].label: _max_error(sinusoidal_table(positions, spec, f32), oracle),
              textbook.label: _max_error(textbook_sinusoidal(n, DIM), oracle)}
    fallback = _fraction(fallback_fraction(lambda p: sinusoidal_table(p, spec, f64), positions, spec.amplitude))
    for t in cases + [textbook, fill, fresh_fill]:
        rows.append(_row(f"sinusoidal {n}x{DIM}", t, textbook, fill, fresh_fill, errors.get(t.label, ""),
                         fallback if t in cases else ""))

    rope = RopeSpec(DIM, base=500000.0)
    inv, attention = rope.inv_freq()
    cos_ref, sin_ref = reference.rope_cos_sin(positions, inv)
    ours = measure("posenc.rope_cos_sin (new arrays)", lambda: rope_cos_sin(positions, rope), nbytes,
                   repeats=repeats)
    into = measure("posenc rope_table (into preallocated `out`)",
                   lambda: rope_table(positions, rope, out=buffer), nbytes, repeats=repeats)
    text = measure("textbook numpy (float32 angles)", lambda: textbook_rope(n, inv), nbytes, repeats=repeats)
    rope_errors = {ours.label: _max_error(rope_cos_sin(positions, rope)[0], cos_ref),
                   text.label: _max_error(textbook_rope(n, inv)[0], cos_ref)}
    rope_fallback = _fraction(fallback_fraction(lambda p: rope_table(p, rope, dtype="float64"), positions, attention))
    for t in (ours, into, text, fill, fresh_fill):
        rows.append(_row(f"RoPE cos+sin {n}x{DIM // 2}x2", t, text, fill, fresh_fill, rope_errors.get(t.label, ""),
                         rope_fallback if t in (ours, into) else ""))
    del sin_ref, buffer
    table = markdown_table(
        ["table", "implementation", "ms (median)", "GB/s", "vs textbook", "vs fill", "vs fresh-page fill",
         "max abs error vs float64", "exact fallback"], rows)
    offsets = {
        f"sinusoidal {n}x{DIM}": (lambda out: sinusoidal_table(positions, spec, f32, out), fallback),
        f"RoPE cos+sin {n}x{DIM // 2}x2, `rope_table`": (lambda out: rope_table(positions, rope, out=out),
                                                          rope_fallback)}
    offset_rows, spreads = _offset_rows(offsets, (n, DIM), fill, fresh_fill, repeats)
    offset_table = markdown_table(["table", "`out` starts", "ms (median)", "GB/s", "vs aligned", "vs fill",
                                   "vs fresh-page fill", "exact fallback"], offset_rows)
    path = f"native {native.ACTIVE.name} (through the CPython binding)" if native.BINDING else "numba"
    return (f"{table}\n\nOne core, float32 output, median of {repeats}, posenc kernel path: {path}. "
            f"Machine: {machine_line()}.\n"
            "A new array pays for fresh pages (the kernel zeroes them first): compare with the fresh-pages row. "
            "Exact fallback: the fraction of float32 elements whose float64 value does not decide their "
            "rounding (`posenc.kernels.rounding.ambiguous` on the float64 table).\n\n"
            f"{offset_table}\n\n{spreads}\n"
            "Into `out` at each offset from a 64-byte line, the offsets timed in turn, round after round; a strided "
            "`out` (not one C-contiguous run) is refused with PosencError naming `out`, so it has no row.\n")


def _fraction(value: float) -> str:
    return f"{value:.2e}"


def _row(table: str, t, textbook, fill, fresh_fill, error: str, fallback: str) -> list[str]:
    return [table, t.label, f"{t.seconds * 1e3:.2f}", f"{t.gbps:.2f}", f"{textbook.seconds / t.seconds:.1f}x",
            f"{t.gbps / fill.gbps:.0%}", f"{fresh_fill.seconds / t.seconds:.0%}", error, fallback]


def _offset_rows(cases: dict, shape: tuple[int, int], fill, fresh_fill, repeats: int) -> tuple[list, str]:
    """Rows for each case into `out` at each of OFFSETS (buffers made once, every page touched),
    and one line with each case's spread (slowest / fastest offset)."""
    buffers = {offset: buffer_at(shape, np.float32, offset) for offset in OFFSETS}
    nbytes = buffers[0].nbytes
    rows, spreads = [], []
    for label, (write, fallback) in cases.items():
        samples = {offset: [] for offset in OFFSETS}
        for offset in OFFSETS:
            write(buffers[offset])  # warm-up
        for _ in range(repeats):  # each offset once per round: all see the same background load
            for offset in OFFSETS:
                t0 = time.perf_counter()
                write(buffers[offset])
                samples[offset].append(time.perf_counter() - t0)
        seconds = {offset: statistics.median(s) for offset, s in samples.items()}
        for offset, s in seconds.items():
            rows.append([label, f"+{offset} bytes" + (" (numpy's own arrays)" if offset == 16 else ""),
                         f"{s * 1e3:.2f}", f"{nbytes / s / 1e9:.2f}", f"{seconds[0] / s:.0%}",
                         f"{fill.seconds / s:.0%}", f"{fresh_fill.seconds / s:.0%}", fallback])
        slowest = max(seconds.values())
        spreads.append(f"{label.split(',')[0]} {slowest / min(seconds.values()):.2f} "
                       f"({slowest / seconds[0]:.2f} of the aligned time)")
    return rows, ("Spread over the offsets, slowest / fastest (target: within 1.10 of the aligned case): "
                  + "; ".join(spreads) + ".")
