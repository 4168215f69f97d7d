"""The shared-memory tables one worker has attached, kept in step with the registry.

Every worker maps every READY table read-only. `refresh()` (run every REFRESH_S in a
thread) follows replacements and removals made by other workers or by `posenc table`;
a table this worker creates or removes is swapped in at once. Replaced mappings are
dropped, never closed: a request still gathering from one keeps it alive until it ends.

Mapping a table takes a while (it is verified), and a PUT or DELETE in any worker may land
meanwhile: a worker holds a table only while the registry names its generation, checked
under one lock whenever tables are taken or dropped, so a table removed or replaced while it
was being mapped is never held after its removal, whichever finished first.
"""

from __future__ import annotations

import threading

import numpy as np

from ...args import integer_range
from ...shm import ShmError, Table, attach, list_tables
from ...shm.paths import resolve_root
from ...shm.registry import RegistryView
from ...tables import TableSpec
from .caches import ByteCache

REFRESH_S = 1.0


def spec_key(spec: TableSpec) -> tuple[str, float | None]:
    """What must match for a table to stand in for a computation: the encoding and seq_len."""
    return spec.encoding.canonical_json, spec.seq_len


class TableCache:
    def __init__(self, root: str, candidates: ByteCache):
        self.root = root
        self._tables: dict[str, Table] = {}
        #: Makes each `apply` one step against the registry (it runs on the event loop and in threads).
        self._lock = threading.Lock()
        #: (spec key, dtype) -> the tables that could answer it; forgotten whenever the tables change.
        self._candidates = candidates

    def __contains__(self, name: str) -> bool:
        return name in self._tables

    def get(self, name: str) -> Table | None:
        return self._tables.get(name)

    def tables(self) -> list[Table]:
        return list(self._tables.values())

    def attach(self, name: str) -> Table:
        """Attach `name` now (blocking: maps and verifies it) and hold it unless it was replaced or
        removed meanwhile (then the table returned is the one that was current, held no longer);
        ShmError if absent."""
        table = attach(name, root=self.root)
        self.apply({name: table})
        return table

    def forget(self, name: str) -> None:
        """Drop `name` once the registry no longer names what is held (a DELETE in this worker)."""
        self.apply({name: None})

    def scan(self) -> dict[str, Table | None]:
        """Blocking part of a refresh: attach what is new or replaced; None marks what is gone."""
        current = {info.name: info.generation for info in list_tables(self.root) if info.state == "READY"}
        holding = dict(self._tables)  # a copy: a request's attach may change the dict meanwhile
        changes: dict[str, Table | None] = {name: None for name in holding if name not in current}
        for name, generation in current.items():
            held = holding.get(name)
            if held is None or held.generation != generation:
                try:
                    changes[name] = attach(name, root=self.root)
                except ShmError:
                    changes[name] = None  # replaced or removed while we looked; next scan catches up
        return changes

    def apply(self, changes: dict[str, Table | None]) -> None:
        """Bring the names in `changes` in step with the registry: hold a mapped table (None: none)
        if the registry names its generation, else keep what is held only if the registry names its."""
        if not changes:
            return
        with self._lock:
            current = _registry_entries(self.root)
            for name, table in changes.items():
                generation = current.get(name)
                if table is not None and table.generation == generation:
                    self._tables[name] = table
                elif name in self._tables and self._tables[name].generation != generation:
                    del self._tables[name]
            self._candidates.clear()

    def candidates(self, key: tuple[str, float | None], dtype: np.dtype) -> tuple[Table, ...]:
        """The tables whose spec matches `key` and that serve `dtype` (matching keys costs microseconds
        a table: done once per key and dtype, until the tables change)."""
        candidates = self._candidates.get((key, dtype))
        if candidates is None:  # weighed by their names: the tables are this cache's, not the entry's
            found = {name: table for name, table in self._tables.items()  # a computed table holds no rows
                     if not table.spec.computed and spec_key(table.spec) == key and table.spec.serves_dtype(dtype)}
            candidates = tuple(found.values())
            self._candidates.put((key, dtype), candidates, weigh=tuple(found))
        return candidates

    def covering(self, key: tuple[str, float | None], positions: np.ndarray, dtype: np.dtype) -> Table | None:
        """A stored table holding exactly these rows at least as precisely as `dtype`, if any."""
        candidates = self.candidates(key, dtype)
        span = integer_range(positions) if candidates and positions.size else None
        if span is None:
            return None
        lo, hi = span
        for table in candidates:
            if table.start <= lo and hi < table.stop:
                return table
        return None


def _registry_entries(root: str) -> dict[str, int]:
    """{name: current generation} in `root`'s registry (empty when there is none yet)."""
    registry = RegistryView.open(resolve_root(root))
    if registry is None:
        return {}
    try:
        return registry.entries()
    finally:
        registry.close()
