"""Readers: `attach` a published table read-only and look rows up in it.

A reader only ever opens files read-only: it never locks, writes, unlinks or registers a
segment anywhere (unlike `multiprocessing.shared_memory`, whose resource tracker unlinks
segments when a reader exits on Python 3.11), so any number of processes can attach.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..args import integer_range, value_range
from ..errors import PosencError
from ..kernels.active import gather_rows, run_rows
from ..tables import TableSpec
from .errors import ShmError
from .listing import list_tables
from .paths import check_name, resolve_root, segment_file
from .registry import RegistryView
from .segment import Mapped, close_mapping, open_ready

#: A publish of the same name between our registry read and our open costs one retry.
_ATTACH_ATTEMPTS = 32


class Table:
    """A READY table mapped read-only. Rows are positions start..stop-1; `array` is the
    zero-copy read-only view [rows, width]. The mapping stays valid after the writer
    replaces or removes the table, until `close()`."""

    def __init__(self, name: str, path: Path, mapped: Mapped):
        self.name = name
        self.path = path
        self.segment = path.name
        self.spec: TableSpec = mapped.spec
        self.generation = mapped.header.generation
        self.start = mapped.spec.start
        self.stop = mapped.spec.stop
        self.array: np.ndarray | None = mapped.data
        self._mapping = mapped.mapping

    def __repr__(self):
        return (f"Table({self.name!r}, generation={self.generation}, positions={self.start}:{self.stop}, "
                f"width={self.spec.width}, dtype={self.spec.dtype})")

    def rows_for(self, positions) -> np.ndarray:
        """int64 row indices for absolute integer positions, each checked against [start, stop)."""
        arr = np.asarray(positions)
        if arr.ndim == 0:
            arr = arr.reshape(1)
        if arr.ndim != 1:
            raise PosencError("positions", f"must be 1-D, got shape {arr.shape}")
        if arr.dtype.kind not in "iuf":
            raise PosencError("positions", f"must be integers, got dtype {arr.dtype}")
        if not arr.size:
            return arr.astype(np.int64)
        span = integer_range(arr) if arr.dtype.kind == "f" else value_range(arr)
        if span is None:
            finite = np.isfinite(arr)
            if not finite.all():  # as every door says it: no table or limit would admit it
                k = int(np.flatnonzero(~finite)[0])
                raise PosencError("positions", f"element {k} is {float(arr[k])!r}, not finite")
            raise PosencError("positions", "table lookups take integer positions")
        if span[0] < self.start or span[1] >= self.stop:
            outside = (arr < self.start) | (arr >= self.stop)
            k = int(np.flatnonzero(outside)[0])
            raise PosencError("positions", f"position {arr[k]} (element {k}) is outside table {self.name!r}, "
                              f"which holds positions [{self.start}, {self.stop})")
        return arr.astype(np.int64) - self.start

    def lookup(self, positions, out: np.ndarray | None = None) -> np.ndarray:
        """Rows for `positions` as [len(positions), width] (into `out` if given), by one gather."""
        table = self._live_array()
        rows = self.rows_for(positions)
        shape = (rows.shape[0], table.shape[1])
        if out is None:
            out = np.empty(shape, table.dtype)
        elif not isinstance(out, np.ndarray) or out.shape != shape or out.dtype != table.dtype \
                or not out.flags.writeable or not out.flags.c_contiguous:
            raise PosencError("out", f"must be a writable C-contiguous {table.dtype} array of shape {shape}")
        run_rows(gather_rows, shape[0], shape[1], table, rows, out)
        return out

    def _live_array(self) -> np.ndarray:
        if self.array is None:
            raise ShmError("table", f"table {self.name!r} is closed")
        return self.array

    def close(self) -> None:
        """Unmap (once no numpy view of `array` is left). Never unlinks anything."""
        if self.array is not None:
            self.array = None
            close_mapping(self._mapping)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def attach(name, *, root=None, verify: bool = True) -> Table:
    """Map the current generation of table `name` (or the READY table holding exactly this
    `TableSpec`) read-only. `verify` recomputes the data checksum once; pass False for big
    tables you trust. Refuses, with ShmError, anything not READY and intact."""
    root = resolve_root(root)
    if isinstance(name, TableSpec):
        name = _name_of(name, root)
    name = check_name(name)
    registry = RegistryView.open(root)
    if registry is None:
        raise ShmError("name", f"no table named {name!r} in {root} (no registry there yet)")
    try:
        for _ in range(_ATTACH_ATTEMPTS):
            generation = registry.generation(name)
            if generation is None:
                raise ShmError("name", f"no table named {name!r} in {root}")
            path = root / segment_file(name, generation)
            try:
                mapped = open_ready(path, verify=verify)
            except FileNotFoundError:
                if registry.generation(name) == generation:
                    raise ShmError("segment", f"{path}: the registry names it but the file is gone") from None
                continue  # replaced between our registry read and our open: read it again
            if (mapped.header.name, mapped.header.generation) != (name, generation):
                close_mapping(mapped.mapping)
                raise ShmError("segment", f"{path}: header names another table or generation (table "
                               f"{mapped.header.name!r} generation {mapped.header.generation}, expected {name!r} "
                               f"generation {generation})")
            return Table(name, path, mapped)
        raise ShmError("registry", f"table {name!r} was replaced {_ATTACH_ATTEMPTS} times while attaching")
    finally:
        registry.close()


def _name_of(table: TableSpec, root: Path) -> str:
    for info in list_tables(root):
        if info.state == "READY" and info.spec == table.to_dict():
            return info.name
    raise ShmError("table", f"no READY table in {root} holds this spec ({table.hash})")
