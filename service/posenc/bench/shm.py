"""`posenc bench shm`: publishing and reading a shared-memory table, each case next to a
plain memset/memcpy of the same bytes in the same run.

Publishing (shm_publish.py): a whole `TableStore.publish`, each of its stages alone (the
rows and their CRC-32C in one pass among them), a publish into a prepared segment (its
preparation and unmap timed as rows of their own, on every kernel thread and on one), and
the machine's floors for writing as many bytes into a new tmpfs file (timed in C), against
a memcpy of warm memory.

(a) single-row lookups in a numba loop over `Table.array` (bounds check + row copy) vs libc
    `memcpy` of the same rows; (b) batches of 1024 random rows through `Table.lookup` vs
    `np.take` and a memcpy of 1024 contiguous rows; (c) the C reader (posenc_shm.h) in a
    second process vs memcpy of the same rows there. Per-lookup p50/p99 come from
    lfence+rdtsc around every single lookup (x86-64; includes the timer, shown separately).
"""

from __future__ import annotations

import ctypes
import math
import platform
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numba as nb
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from ..args import as_int
from ..kernels import set_threads, threads
from ..shm import TableStore, attach
from ..shm.paths import resolve_root
from ..encodings import SinusoidalSpec
from ..tables import TableSpec
from .c_helpers import compile_helper
from .shm_publish import MEMCPY_LABEL, publish_rows
from .timing import machine_line, markdown_table

RING = 64  # destination rows, reused: a caller's output buffer stays in cache


@intrinsic
def _ticks(typingctx):
    """lfence; rdtsc: a timestamp taken after every earlier instruction has completed."""
    def codegen(context, builder, signature, args):
        module = builder.module
        lfence = cgutils.get_or_insert_function(module, ir.FunctionType(ir.VoidType(), []), "llvm.x86.sse2.lfence")
        rdtsc = cgutils.get_or_insert_function(module, ir.FunctionType(ir.IntType(64), []), "llvm.readcyclecounter")
        builder.call(lfence, [])
        return builder.call(rdtsc, [])

    return types.uint64(), codegen


_memcpy = ctypes.CDLL(None).memcpy
_memcpy.argtypes = [ctypes.c_size_t, ctypes.c_size_t, ctypes.c_size_t]  # addresses as integers
_memcpy.restype = ctypes.c_size_t


@nb.njit(nogil=True)
def _copy_rows(table, start, positions, out, timed, cycles):
    """What a reader's numba code does per lookup: bounds check, then copy the row."""
    n_rows, width = table.shape
    for i in range(positions.shape[0]):
        t0 = _ticks() if timed else 0
        row = positions[i] - start
        if row < 0 or row >= n_rows:
            return False
        dst = out[i % RING]
        for j in range(width):
            dst[j] = table[row, j]
        if timed:
            cycles[i] = _ticks() - t0
    return True


@nb.njit(nogil=True)
def _memcpy_rows(table, start, positions, out, timed, cycles):
    """The baseline: libc memcpy of the same rows from the same mapping, no checks."""
    row_bytes = table.shape[1] * table.itemsize
    base, dst_base = table.ctypes.data, out.ctypes.data
    for i in range(positions.shape[0]):
        t0 = _ticks() if timed else 0
        _memcpy(dst_base + (i % RING) * row_bytes, base + (positions[i] - start) * row_bytes, row_bytes)
        if timed:
            cycles[i] = _ticks() - t0
    return True


@nb.njit(nogil=True)
def _timer_only(cycles):
    for i in range(cycles.shape[0]):
        t0 = _ticks()
        cycles[i] = _ticks() - t0


def add_arguments(parser) -> None:
    parser.add_argument("--rows", type=int, default=131072, help="table rows (default %(default)s)")
    parser.add_argument("--dim", type=int, default=128, help="table width, float32 (default %(default)s)")
    parser.add_argument("--lookups", type=int, default=1_000_000, help="random lookups per case")
    parser.add_argument("--batch", type=int, default=1024, help="rows per Table.lookup call (default %(default)s)")
    parser.add_argument("--repeats", type=int, default=3, help="passes per case; rows/s is their median")


def run(args) -> str:
    if platform.machine() not in ("x86_64", "AMD64"):
        return "posenc bench shm times single lookups with rdtsc and needs x86-64.\n"
    for field in ("rows", "dim", "lookups", "repeats"):
        as_int(getattr(args, field), field, minimum=1)
    as_int(args.batch, "batch", minimum=1, maximum=min(args.rows, args.lookups))
    previous_threads = threads()
    set_threads(1)
    root = Path(tempfile.mkdtemp(prefix="posenc-bench-", dir=resolve_root(None)))
    try:
        return _run(root, args, previous_threads)
    finally:
        set_threads(previous_threads)
        shutil.rmtree(root, ignore_errors=True)


@nb.njit(nogil=True)
def _ticks_now():
    return _ticks()


def _tick_ns() -> float:
    """Nanoseconds per rdtsc tick, against perf_counter over 200 ms."""
    t0, c0 = time.perf_counter(), _ticks_now()
    while time.perf_counter() - t0 < 0.2:
        pass
    return (time.perf_counter() - t0) * 1e9 / (_ticks_now() - c0)


def _case(kernel, table, start, positions, width, repeats) -> tuple[float, np.ndarray]:
    """(median rows/s of `repeats` untimed passes, ticks of each lookup in one timed pass)."""
    out = np.empty((RING, width), np.float32)
    cycles = np.zeros(positions.shape[0], np.uint64)
    kernel(table, start, positions[:1000], out, True, cycles)  # compile + warm
    rates = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        kernel(table, start, positions, out, False, cycles)
        rates.append(positions.shape[0] / (time.perf_counter() - t0))
    kernel(table, start, positions, out, True, cycles)
    return float(np.median(rates)), cycles


def _calls(fn, arguments, rows_per_call: int, repeats: int) -> tuple[float, np.ndarray]:
    """(rows/s: median over `repeats` passes, ns of every call) of fn(argument) for each argument."""
    fn(arguments[0])
    samples, rates = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        for argument in arguments:
            t0 = time.perf_counter()
            fn(argument)
            samples.append(time.perf_counter() - t0)
        rates.append(len(arguments) * rows_per_call / (time.perf_counter() - started))
    return float(np.median(rates)), np.array(samples) * 1e9


def _c_reader(root: Path, name: str, lookups: int, repeats: int) -> dict[str, list[float]] | str:
    exe = root / "shm_reader_bench"
    skipped = compile_helper("shm_reader_bench.c", exe)
    if skipped:
        return skipped
    out = subprocess.run([str(exe), str(root), name, str(lookups), str(repeats)], check=True, capture_output=True,
                         text=True)
    return {line.split()[0]: [float(v) for v in line.split()[1:]] for line in out.stdout.splitlines()}


def _fmt_rate(rate: float) -> str:
    return f"{rate / 1e6:.1f} M"


def _run(root: Path, args, parallel: int) -> str:
    table = TableSpec(SinusoidalSpec(args.dim), 0, args.rows)
    publishing = publish_rows(root, table, args.repeats, parallel)
    store = TableStore(root)
    store.publish("bench", table)
    t0 = time.perf_counter()
    tbl = attach("bench", root=root)
    attach_verify_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    attach("bench", root=root, verify=False).close()
    attach_s = time.perf_counter() - t0

    rng = np.random.default_rng(0)
    positions = rng.integers(0, args.rows, args.lookups).astype(np.int64)
    tick_ns = _tick_ns()
    timer = np.zeros(100_000, np.uint64)
    _timer_only(timer)
    timer_ns = float(np.median(timer)) * tick_ns
    rows, width = [], args.dim

    def add(case, label, rate, latencies_ns, baseline_rate, unit="lookup"):
        p50, p99 = np.percentile(latencies_ns, [50, 99])
        rows.append([case, label, _fmt_rate(rate), f"{p50:.0f} ns / {unit}", f"{p99:.0f} ns / {unit}",
                     f"{rate / baseline_rate:.0%}"])

    mem_rate, mem_cycles = _case(_memcpy_rows, tbl.array, tbl.start, positions, width, args.repeats)
    api_rate, api_cycles = _case(_copy_rows, tbl.array, tbl.start, positions, width, args.repeats)
    add("(a) single row, numba loop", "bounds check + row copy from `Table.array`", api_rate, api_cycles * tick_ns,
        mem_rate)
    add("(a) single row, numba loop", "libc `memcpy` of the same rows", mem_rate, mem_cycles * tick_ns, mem_rate)

    batches = [positions[k:k + args.batch] for k in range(0, positions.shape[0] - args.batch + 1, args.batch)]
    buf = np.empty((args.batch, width), np.float32)
    blocks = [tbl.array[lo:lo + args.batch] for lo in (batch[0] % (args.rows - args.batch) for batch in batches)]
    copy_rate, copy_ns = _calls(lambda block: np.copyto(buf, block), blocks, args.batch, args.repeats)
    lookup_rate, lookup_ns = _calls(lambda b: tbl.lookup(b, out=buf), batches, args.batch, args.repeats)
    take_rate, take_ns = _calls(lambda b: np.take(tbl.array, b, axis=0, out=buf), batches, args.batch, args.repeats)
    unit = f"call of {args.batch}"
    add(f"(b) batches of {args.batch}", "`Table.lookup(positions, out=)`", lookup_rate, lookup_ns, copy_rate, unit)
    add(f"(b) batches of {args.batch}", "`np.take(Table.array, rows, axis=0, out=)`", take_rate, take_ns,
        copy_rate, unit)
    add(f"(b) batches of {args.batch}", f"`memcpy` of {args.batch} contiguous rows (same bytes)", copy_rate,
        copy_ns, copy_rate, unit)

    c = _c_reader(root, "bench", args.lookups, args.repeats)
    if isinstance(c, str):
        rows.append(["(c) C reader, 2nd process", c, "", "", "", ""])
    else:
        for key, label in (("api", "`posenc_shm_row` + `memcpy`"), ("memcpy", "`memcpy` of the same rows")):
            rate, p50, p99 = c[key]
            rows.append(["(c) C reader, 2nd process", label, _fmt_rate(rate), f"{p50:.0f} ns / lookup",
                         f"{p99:.0f} ns / lookup", f"{rate / c['memcpy'][0]:.0%}"])
    tbl.close()
    store.close()

    nbytes = table.nbytes
    memcpy_s = dict(publishing).get(MEMCPY_LABEL)
    publish_md = markdown_table(["publish stage or floor", "time", "GB/s", "vs memcpy"], [
        [label, "", "", ""] if math.isnan(seconds) else  # the floors, skipped
        [label, f"{seconds * 1e3:.1f} ms", f"{nbytes / seconds / 1e9:.2f}",
         f"{memcpy_s / seconds:.0%}" if memcpy_s else ""]
        for label, seconds in publishing])
    table_md = markdown_table(["case", "implementation", "rows/s", "p50", "p99", "vs memcpy"], rows)
    notes = [
        (f"Table: sinusoidal {args.rows}x{args.dim} float32 ({nbytes / 2**20:.0f} MiB) in {resolve_root(None)}; "
         f"{args.lookups} uniformly random positions per case, rows/s the median of {args.repeats} passes; "
         f"one core, except the publishes into a prepared segment on {parallel} threads. Publish rows: the median "
         "of the same number of runs, in the same process."),
        f"Attach: {attach_s * 1e3:.2f} ms; with checksum verification {attach_verify_s * 1e3:.1f} ms "
        f"({nbytes / attach_verify_s / 1e9:.1f} GB/s)"
        + ("." if isinstance(c, str) else f"; C reader attach with verification {c['attach_ms'][0]:.1f} ms."),
        f"Single-lookup latencies include the timer itself (lfence+rdtsc pair: {timer_ns:.0f} ns median in numba"
        + ("" if isinstance(c, str) else f", {c['timer_ns'][0]:.0f} ns in C") + ").",
        f"Machine: {machine_line()}.",
    ]
    return publish_md + "\n\n" + table_md + "\n\n" + "\n".join(notes) + "\n"


