"""Split a kernel's rows across a small thread pool (kernels release the GIL)."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor, wait

#: Below this many output elements a job runs on the calling thread: a hand-off costs ~20 us.
MIN_PARALLEL_ELEMENTS = 1 << 18

_threads = max(1, int(os.environ.get("POSENC_THREADS", "0")) or os.cpu_count() or 1)
_pool: ThreadPoolExecutor | None = None
#: Set on the pool's own threads: a job started from inside a job runs inline there, since
#: queueing it behind the jobs that wait for it would deadlock a full pool.
_worker = threading.local()


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


def _mark_worker() -> None:
    _worker.inside = True


def run_each(job, items: list) -> list:
    """[job(item) for item in items], the items in parallel on the pool (on the calling thread
    when there is one item, one thread, or the caller is a pool thread itself). Returns only
    once every job has finished, even when one raises: jobs write into their caller's buffers."""
    global _pool
    if len(items) <= 1 or _threads <= 1 or getattr(_worker, "inside", False):
        return [job(item) for item in items]
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=_threads, thread_name_prefix="posenc-kernel", initializer=_mark_worker)
    futures = [_pool.submit(job, item) for item in items]
    wait(futures)
    return [future.result() for future in futures]


def run_rows(kernel, n_rows: int, elements_per_row: int, *args) -> None:
    """Call kernel(*args, lo, hi) over [0, n_rows), in parallel chunks when the job is big."""
    chunks = max(1, min(_threads, n_rows * max(elements_per_row, 1) // MIN_PARALLEL_ELEMENTS, n_rows))
    bounds = [n_rows * k // chunks for k in range(chunks + 1)]
    run_each(lambda lo_hi: kernel(*args, *lo_hi), list(zip(bounds[:-1], bounds[1:])))
