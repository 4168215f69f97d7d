"""One worker's state: config, attached tables, metrics, readiness, and where big jobs run.

`start()` (the app's lifespan startup) applies the output limit, attaches the configured
tables the parent published, warms every kernel and only then reports ready; `stop()`
undoes it. Computations estimated above INLINE_BUDGET_NS run in a worker thread, at most one
per kernel thread at a time, so the event loop keeps answering and memory stays bounded.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import anyio
import anyio.to_thread

from ...config import ServiceConfig
from ...kernels.parallel import threads
from ...limits import LIMITS
from ...shm import ShmError, Table, TableStore
from ...shm.paths import check_name
from ...tables import TableSpec
from . import metrics as metrics_module
from ..pipeline.budget import MemoryBudget
from .caches import ByteCache
from ..api.errors import HttpError
from .ledger import record_created_table
from .metrics import Metrics
from .spec_cache import SpecCache
from .table_cache import REFRESH_S, TableCache
from .warmup import warm_kernels, warm_lookups

log = logging.getLogger("posenc.http")
T = TypeVar("T")


def make_run_dir() -> Path:
    """A fresh run directory, in memory (/dev/shm) when there is one: the metrics files are written
    on every request, and a disk-backed mapping would fault again after each writeback."""
    memory = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    return Path(tempfile.mkdtemp(prefix="posenc-run-", dir=memory))


#: Each cache's cap as a fraction (1/n) of `max_buffered_bytes`: together under a third of the
#: budget, so the caches never take the bytes requests need (caches.py).
CACHE_SHARES = {"specs": 8, "plans": 8, "rows": 32, "candidates": 32}

#: Jobs estimated to take longer than this leave the event loop. A thread hop costs 50 us on an
#: idle machine and up to ~1 ms on a busy one, so only work that is long anyway is worth one.
INLINE_BUDGET_NS = 1_000_000



def freeze_startup_heap() -> None:
    """Move everything alive after start-up (imported modules, compiled kernels, mapped tables:
    ~100k objects) out of the garbage collector's reach. A full collection of that heap takes
    tens of milliseconds on the event loop: a pause every request in flight then waits for,
    which was the service's P99. Requests' own objects are still collected as usual."""
    gc.collect()
    gc.freeze()

class Service:
    def __init__(self, config: ServiceConfig, run_dir: str | os.PathLike | None,
                 routes: Sequence[tuple[str, str]]):
        """`run_dir` is the service instance's shared directory (metrics files, created-tables
        ledger), made by `posenc serve`; without one the app is standalone (tests, embedding)
        and makes, then cleans up, its own. `routes` are the (method, path) pairs metrics count."""
        self.config = config
        self.standalone = run_dir is None
        self.run_dir = None if run_dir is None else Path(run_dir)
        self.routes = tuple(routes)
        self.budget = MemoryBudget(config.limits.max_buffered_bytes)
        self.tables = TableCache(config.server.shm_dir, self.cache(CACHE_SHARES["candidates"]))
        #: Validated specs by their JSON: one cache for every route that builds a spec from a request.
        self.specs = SpecCache(self.cache(CACHE_SHARES["specs"]))
        self.configured = tuple(t.name for t in config.tables)
        self.metrics: Metrics | None = None
        self.ready = False
        self.in_flight = 0
        self._jobs = anyio.CapacityLimiter(threads())
        self._store: TableStore | None = None
        self._refresher: asyncio.Task | None = None
        #: The library's limits before start took the configured ones; given back on stop.
        self._library_limits: tuple[int, int] | None = None

    def cache(self, share: int) -> ByteCache:
        """A cache of at most 1/`share` of the worker's budget, its bytes held from the budget."""
        return ByteCache(self.budget, self.budget.limit // share)

    # --- lifecycle ---------------------------------------------------------------------
    async def start(self) -> None:
        if self.standalone:
            self.run_dir = make_run_dir()
        self.metrics = Metrics(self.run_dir, self.routes)
        metrics_module.activate(self.metrics)
        # The library's limits are process-wide: take the configured ones while serving, give them back on
        # stop. Every worker runs this, so each enforces the [limits] posenc serve resolved.
        self._library_limits = (LIMITS.max_output_bytes, LIMITS.max_abs_position)
        LIMITS.max_output_bytes = self.config.limits.max_output_bytes
        LIMITS.max_abs_position = self.config.limits.max_abs_position
        await anyio.to_thread.run_sync(self._attach_and_warm)
        if not self.standalone:  # a served worker; tests and embedders keep their own heap as it is
            freeze_startup_heap()
        self.ready = not self.missing_tables()
        if not self.ready:
            log.error("not ready: configured tables missing from %s: %s", self.config.server.shm_dir,
                      ", ".join(self.missing_tables()))
        self._refresher = asyncio.create_task(self._refresh_forever())

    def _attach_and_warm(self) -> None:
        for name in self.configured:
            try:
                self.tables.attach(name)
            except ShmError as exc:
                log.error("cannot attach configured table %r: %s", name, exc)
        warm_kernels()
        warm_lookups(self.tables.tables())

    async def stop(self) -> None:
        self.ready = False
        if self._library_limits is not None:
            LIMITS.max_output_bytes, LIMITS.max_abs_position = self._library_limits
        if self._refresher is not None:
            self._refresher.cancel()
        if self.metrics is not None:
            metrics_module.activate(None)
            self.metrics.close()
        if self.standalone:  # served: the tables outlive this worker; `posenc serve` removes them at exit
            if self._store is not None:
                self._store.close()
            shutil.rmtree(self.run_dir, ignore_errors=True)

    async def _refresh_forever(self) -> None:
        while True:
            await asyncio.sleep(REFRESH_S)
            try:
                self.tables.apply(await anyio.to_thread.run_sync(self.tables.scan))
                if self._store is not None:  # tables it published, since replaced or removed elsewhere
                    await anyio.to_thread.run_sync(self._store.release_superseded)
            except Exception:  # a torn listing must not end refreshing for good
                log.exception("table refresh failed")
            self.ready = self.ready or not self.missing_tables()

    def missing_tables(self) -> list[str]:
        return [name for name in self.configured if name not in self.tables]

    # --- work ----------------------------------------------------------------------------
    async def run(self, job: Callable[[], T], cost_ns: float) -> T:
        """job() inline when its estimated cost is small, else in a worker thread (at most one per
        kernel thread at a time)."""
        if cost_ns <= INLINE_BUDGET_NS:
            return job()
        return await self.in_thread(job)

    async def in_thread(self, job: Callable[[], T]) -> T:
        """job() in a worker thread, at most one per kernel thread at a time."""
        return await anyio.to_thread.run_sync(job, limiter=self._jobs)

    async def table(self, name: str) -> Table:
        """An attached table, attaching it now if another process published it since the last refresh."""
        table = self.tables.get(name)
        if table is not None:
            return table
        check_name(name)  # a malformed name is a 422, not a missing table
        try:
            return await anyio.to_thread.run_sync(self.tables.attach, name)
        except ShmError:  # its message names the shm directory: not for HTTP clients
            raise HttpError("not_found", f"no table named {name!r}", "name") from None

    # --- table management (behind the API key) -------------------------------------------
    def _writable(self, name: str) -> TableStore:
        if name in self.configured:
            raise HttpError("conflict", f"table {name!r} comes from the service config; change it there", "name")
        if self._store is None:
            self._store = TableStore(self.config.server.shm_dir)
        return self._store

    async def publish(self, name: str, spec: TableSpec):
        """Publish `spec` as `name` and hold it in this worker. A DELETE (here or in another worker)
        may remove it before this worker has mapped it: the PUT still happened, before that DELETE,
        so it is answered as done, and this worker holds no table of that name."""
        store = self._writable(name)
        info = await anyio.to_thread.run_sync(store.publish, name, spec, limiter=self._jobs)
        record_created_table(self.run_dir, name, info.generation)
        try:
            await anyio.to_thread.run_sync(self.tables.attach, name)
        except ShmError as exc:
            self.tables.forget(name)  # an older generation it may hold is not current either
            if exc.field != "name":  # not a removal: the next refresh attaches it; the log says why not now
                log.warning("published table %r but could not attach it: %s", name, exc)
        return info

    async def remove(self, name: str) -> None:
        """Unpublish `name`: 404 if no table has that name (none was published, or an earlier DELETE
        here or in another worker removed it: this worker then lets go of what it may still hold
        now, not at its next refresh)."""
        store = self._writable(name)
        try:
            await anyio.to_thread.run_sync(store.remove, name)
            removed = True
        except ShmError as exc:
            if exc.field != "name":  # the store could not do it (e.g. its lock held too long): not a 404
                raise
            removed = False
        self.tables.forget(name)
        if not removed:
            raise HttpError("not_found", f"no table named {name!r}", "name")
