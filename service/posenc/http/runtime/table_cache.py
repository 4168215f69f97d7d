"""The shared-memory tables one worker has attached, kept in step with the registry.

Every worker maps every READY table read-only. `refresh()` (run every REFRESH_S in a
thread) follows replacements and removals made by other workers or by `posenc table`;
a table this worker creates or removes is swapped in at once. Replaced mappings are
dropped, never closed: a request still gathering from one keeps it alive until it ends.
"""

from __future__ import annotations

import numpy as np

from ...args import integer_range
from ...shm import ShmError, Table, attach, list_tables
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
        #: (spec key, dtype) -> the tables that could answer it; forgotten whenever the tables change.
        self._candidates = candidates

    def __contains__(self, name: str) -> bool:
        return name in self._tables

    def get(self, name: str) -> Table | None:
        return self._tables.get(name)

    def tables(self) -> list[Table]:
        return list(self._tables.values())

    def attach(self, name: str) -> Table:
        """Attach `name` now (blocking: maps and verifies it) and remember it; ShmError if absent."""
        table = attach(name, root=self.root)
        self._tables[name] = table
        self._candidates.clear()
        return table

    def forget(self, name: str) -> None:
        self._tables.pop(name, None)
        self._candidates.clear()

    def scan(self) -> dict[str, Table | None]:
        """Blocking part of a refresh: attach what is new or replaced; None marks what is gone."""
        current = {info.name: info.generation for info in list_tables(self.root) if info.state == "READY"}
        changes: dict[str, Table | None] = {name: None for name in self._tables if name not in current}
        for name, generation in current.items():
            held = self._tables.get(name)
            if held is None or held.generation != generation:
                try:
                    changes[name] = attach(name, root=self.root)
                except ShmError:
                    changes[name] = None  # replaced or removed while we looked; next scan catches up
        return changes

    def apply(self, changes: dict[str, Table | None]) -> None:
        for name, table in changes.items():
            if table is None:
                self._tables.pop(name, None)
            else:
                self._tables[name] = table
        if changes:
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

