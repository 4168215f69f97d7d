"""Timing helpers shared by the benchmark suites."""

from __future__ import annotations

import os
import platform
import statistics
import time
from dataclasses import dataclass

import numpy as np


@dataclass
class Timing:
    label: str
    seconds: float  # median of the repeats
    nbytes: int
    cpu_seconds: float = 0.0  # median of the repeats' CPU time of the calling thread (a busy machine's
    # other processes inflate `seconds`, not this)

    @property
    def gbps(self) -> float:
        return self.nbytes / self.seconds / 1e9


def measure(label: str, fn, nbytes: int, *, repeats: int = 5, warmup: int = 1) -> Timing:
    for _ in range(warmup):
        fn()
    samples, cpu = [], []
    for _ in range(repeats):
        c0, t0 = time.thread_time(), time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
    return Timing(label, statistics.median(samples), nbytes, statistics.median(cpu))


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_ticks(cpus) -> dict[int, list[int]]:
    """{cpu: its /proc/stat counters (user, nice, system, idle, iowait, irq, softirq, steal, ...), in
    clock ticks} for the CPUs of `cpus` that /proc/stat lists; {} where there is no /proc/stat."""
    ticks = {}
    try:
        with open("/proc/stat") as f:
            for line in f:
                name, *fields = line.split()
                if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus:
                    ticks[int(name[3:])] = [int(value) for value in fields]
    except (OSError, ValueError):
        return {}
    return ticks


def machine_line() -> str:
    return f"{cpu_model()}, {os.cpu_count()} logical CPUs, Python {platform.python_version()}"


def markdown_table(headers: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(out)


def buffer_at(shape: tuple[int, ...], dtype, offset: int) -> np.ndarray:
    """An array of `shape` whose data starts `offset` bytes past a 64-byte (cache-line) boundary,
    every page touched once: numpy's own big arrays start 16 bytes past one, aligned ones at 0."""
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.ones(nbytes + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset
    return raw[start:start + nbytes].view(dtype).reshape(shape)


def fallback_fraction(rows64, positions: np.ndarray, amp: float, chunk: int = 1 << 15) -> float:
    """The fraction of a float32 table's elements whose float64 value does not decide its rounding
    (posenc.kernels.rounding.ambiguous: the elements an exact fallback recomputes), from rows64,
    positions -> the same rows in float64, `chunk` positions at a time (a bounded working set)."""
    from ..kernels.rounding import ambiguous  # noqa: PLC0415  loads the kernels: only the suites that time them

    hits = total = 0
    for lo in range(0, positions.shape[0], chunk):
        values = rows64(positions[lo:lo + chunk])
        hits += int(np.count_nonzero(ambiguous(values, amp, np.float32)))
        total += values.size
    return hits / max(total, 1)
