"""`posenc bench tables`: sinusoidal and RoPE cos/sin tables, one core, float32.

Baselines in the same run: the textbook numpy code (the one in every tutorial, float32
angles) and `ndarray.fill` of the same bytes (the memory write bandwidth, the ceiling).
"""

from __future__ import annotations

import math

import numpy as np

from .. import native, reference
from ..api.rope import rope_cos_sin, rope_table
from ..api.sinusoidal import sinusoidal_table
from ..kernels import set_threads, threads
from ..encodings import RopeSpec, SinusoidalSpec
from .timing import machine_line, markdown_table, measure

N_ROWS = 131072
DIM = 128


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
    f32 = np.dtype(np.float32)
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
    for t in cases + [textbook, fill, fresh_fill]:
        rows.append([f"sinusoidal {n}x{DIM}", t.label, f"{t.seconds * 1e3:.2f}", f"{t.gbps:.2f}",
                     f"{textbook.seconds / t.seconds:.1f}x", f"{t.gbps / fill.gbps:.0%}", errors.get(t.label, "")])

    rope = RopeSpec(DIM, base=500000.0)
    inv, _ = rope.inv_freq()
    cos_ref, sin_ref = reference.rope_cos_sin(positions, inv)
    ours = measure("posenc.rope_cos_sin (new arrays)", lambda: rope_cos_sin(positions, rope), nbytes,
                   repeats=repeats)
    into = measure("posenc rope_table (into preallocated `out`)",
                   lambda: rope_table(positions, rope, out=buffer), nbytes, repeats=repeats)
    text = measure("textbook numpy (float32 angles)", lambda: textbook_rope(n, inv), nbytes, repeats=repeats)
    rope_errors = {ours.label: _max_error(rope_cos_sin(positions, rope)[0], cos_ref),
                   text.label: _max_error(textbook_rope(n, inv)[0], cos_ref)}
    for t in (ours, into, text, fill, fresh_fill):
        rows.append([f"RoPE cos+sin {n}x{DIM // 2}x2", t.label, f"{t.seconds * 1e3:.2f}", f"{t.gbps:.2f}",
                     f"{text.seconds / t.seconds:.1f}x", f"{t.gbps / fill.gbps:.0%}", rope_errors.get(t.label, "")])
    del sin_ref
    table = markdown_table(
        ["table", "implementation", "ms (median)", "GB/s", "vs textbook", "vs fill", "max abs error vs float64"],
        rows)
    path = f"native {native.ACTIVE.name} (through the CPython binding)" if native.BINDING else "numba"
    return (f"{table}\n\nOne core, float32 output, median of {repeats}, posenc kernel path: {path}. "
            f"Machine: {machine_line()}.\n"
            "A new array pays for fresh pages (the kernel zeroes them first): compare with the fresh-pages row.\n")
