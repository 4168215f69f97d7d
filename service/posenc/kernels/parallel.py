"""Split a kernel's rows across a small thread pool (kernels release the GIL)."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

#: Below this many output elements a job runs on the calling thread: a hand-off costs ~20 us.
MIN_PARALLEL_ELEMENTS = 1 << 18

_threads = max(1, int(os.environ.get("POSENC_THREADS", "0")) or os.cpu_count() or 1)
_pool: ThreadPoolExecutor | None = None


def threads() -> int:
    return _threads


def set_threads(n: int) -> None:
    """Use at most n threads per call (1 = everything on the calling thread)."""
    global _threads, _pool
    if n < 1:
        raise ValueError("threads: must be >= 1")
    _threads = n
    if _pool is not None:
        _pool.shutdown(wait=True)
        _pool = None


def _forget_pool() -> None:
    """In a forked child: the pool's threads stayed in the parent, so its queue would never be
    served (the first big job would hang); the next big job makes a fresh pool."""
    global _pool
    _pool = None


os.register_at_fork(after_in_child=_forget_pool)


def run_rows(kernel, n_rows: int, elements_per_row: int, *args) -> None:
    """Call kernel(*args, lo, hi) over [0, n_rows), in parallel chunks when the job is big."""
    global _pool
    chunks = min(_threads, max(1, n_rows * max(elements_per_row, 1) // MIN_PARALLEL_ELEMENTS), n_rows)
    if chunks <= 1:
        kernel(*args, 0, n_rows)
        return
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=_threads, thread_name_prefix="posenc-kernel")
    bounds = [n_rows * k // chunks for k in range(chunks + 1)]
    futures = [_pool.submit(kernel, *args, lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:])]
    for future in futures:
        future.result()
