"""Readers: `attach` a published table read-only and look rows up in it.

A reader only ever opens files read-only: it never locks, writes, unlinks or registers a
segment anywhere (unlike `multiprocessing.shared_memory`, whose resource tracker unlinks
segments when a reader exits on Python 3.11), so any number of processes can attach.
"""

from __future__ import annotations

from mmap import mmap
from pathlib import Path

import numpy as np

from ..args import as_positions, integer_range, value_range
from ..errors import PosencError
from ..kernels.active import gather_rows, run_rows
from ..limits import LIMITS
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
    replaces or removes the table, until `close()`.

    A named computed encoding (`computed`, `TableSpec(..., computed=True)`) has no `array`
    (None): `lookup` and `rows` compute the rows of any position in [start, stop), fractional
    ones too, bit for bit what `TableSpec.compute` and the binary server give."""

    def __init__(self, name: str, path: Path, mapped: Mapped):
        self.name = name
        self.path = path
        self.segment = path.name
        self.spec: TableSpec = mapped.spec
        self.generation = mapped.header.generation
        self.start = mapped.spec.start
        self.stop = mapped.spec.stop
        self.computed = mapped.spec.computed
        self.stored_bytes = mapped.header.data_nbytes  # the rows, or a computed table's spec block
        self._row_functions: dict[np.dtype, object] = {}  # a computed table's, by dtype (TableSpec.rows_function)
        self.array: np.ndarray | None = None if self.computed else mapped.data
        self._mapping: mmap | None = mapped.mapping

    def __repr__(self):
        held = "computed" if self.computed else f"dtype={self.spec.dtype}"
        return (f"Table({self.name!r}, generation={self.generation}, positions={self.start}:{self.stop}, "
                f"width={self.spec.width}, {held})")

    def rows(self, positions, dtype: np.dtype) -> np.ndarray:
        """[len(positions), width] as `dtype`, each value rounded once from its float64 value
        (a stored table: its rows cast by `TableSpec.cast_rows`; a computed one: computed in `dtype`)."""
        if self.computed:
            return self._compute(positions, dtype)
        return self.spec.cast_rows(self.lookup(positions), positions, dtype)

    def row_in_buffer(self, position: int, dtype: np.dtype) -> np.ndarray:
        """A computed table's row [width] at an integer `position` in [start, stop), for HTTP's
        single-row path: the checks of `rows` cost more than the row, so they are made on the int,
        and the row may be a buffer the table reuses (PlannedRows.one_row: valid until the next
        call, one thread: the worker's event loop, which copies it out at once)."""
        if not abs(position) <= LIMITS.max_abs_position:
            return self.rows([position], dtype)[0]  # refused there, with the message
        rows = self._rows_function(dtype)
        one_row = getattr(rows, "one_row", None)
        return rows(np.array([position], dtype=np.float64))[0] if one_row is None else one_row(position)

    def _rows_function(self, dtype: np.dtype):
        found = self._row_functions.get(dtype)
        if found is None:
            if self._mapping is None:
                raise ShmError("table", f"table {self.name!r} is closed")
            found = self._row_functions[dtype] = self.spec.rows_function(dtype)
        return found

    def _compute(self, positions, dtype: np.dtype, out: np.ndarray | None = None) -> np.ndarray:
        if self._mapping is None:
            raise ShmError("table", f"table {self.name!r} is closed")
        values = as_positions(positions)
        # p < stop as floor(p) <= stop - 1: exact in float64 (|p| <= 2**53), where stop itself may not be
        first, last = float(self.start), float(self.stop - 1)
        if values.size and (np.ceil(values).min() < first or np.floor(values).max() > last):
            k = int(np.flatnonzero((np.ceil(values) < first) | (np.floor(values) > last))[0])
            raise PosencError("positions", f"position {values[k]:g} (element {k}) is outside table {self.name!r}, "
                              f"which serves positions [{self.start}, {self.stop})")
        return self._rows_function(dtype)(values) if out is None else self.spec.compute(values, dtype, out=out)

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
        """Rows for `positions` as [len(positions), width] of the table's dtype (into `out` if
        given): one gather, or for a computed table one kernel call."""
        if self.computed:
            if out is not None:
                _check_out(out, (int(np.size(positions)), self.spec.width), self.spec.np_dtype)
            return self._compute(positions, self.spec.np_dtype, out)
        table = self._live_array()
        rows = self.rows_for(positions)
        shape = (rows.shape[0], table.shape[1])
        if out is None:
            out = np.empty(shape, table.dtype)
        else:
            _check_out(out, shape, table.dtype)
        run_rows(gather_rows, shape[0], shape[1], table, rows, out)
        return out

    def _live_array(self) -> np.ndarray:
        if self.array is None:
            raise ShmError("table", f"table {self.name!r} is closed")
        return self.array

    def close(self) -> None:
        """Unmap (once no numpy view of `array` is left). Never unlinks anything."""
        if self._mapping is not None:
            self.array = None
            close_mapping(self._mapping)
            self._mapping = None
            self._row_functions.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _check_out(out, shape: tuple[int, int], dtype: np.dtype) -> None:
    """`lookup(out=)`: the kernels write whole contiguous rows of the table's dtype."""
    if not isinstance(out, np.ndarray) or out.shape != shape or out.dtype != dtype or not out.flags.writeable \
            or not out.flags.c_contiguous:
        raise PosencError("out", f"must be a writable C-contiguous {dtype} array of shape {shape}")


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
