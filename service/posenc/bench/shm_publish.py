"""The publish rows of `posenc bench shm`: a whole `TableStore.publish` of the benchmark
table, each of its stages timed alone on the same bytes, and the machine's floors for
writing as many bytes into a new tmpfs file, all in one run, so the table says where the
time goes and how far a publish is from memory speed.

Stages, as segment.create/fill and TableStore.publish do them: `posix_fallocate` of a new
file; the rows computed block by block into one cache-sized buffer; the block checksums
(CRC-32C by the fastest native kernel, then by each slower kernel the CPU has, without the
native library, and zlib's CRC-32); the rows and their CRC-32C in one pass (the native
`sincos_rows_crc`, what a CRC-32C publish of this table runs instead of those two); the
`pwrite` of every block into the reserved file; and the fixed cost of a publish (create,
header, READY, the registry flip, unlinking the replaced generation), timed as the publish
of a one-row table.

Prepared segments (`TableStore.prepare`): the preparation (an unnamed file reserved and
populated), timed on its own because a store does it before the publish or on its
background thread; the publish into it on every kernel thread and on one (a CRC-32C publish
of this table runs the one-pass kernel on one thread either way); and the unmap of the used
segment, which the store's background thread does after the flip. Their sum is what one
publish costs a `keep_prepared` store in CPU time, whichever thread spends it. Its stages:
the rows computed into a populated mapping and checksummed there afterwards (two passes
over memory, the way before the one-pass kernel), and the one pass it runs now.

The floors come from shm_publish_floors.c, timed in C so no Python is in them: every way
this machine has to put the bytes into a new file (pwrite with and without fallocate,
writable mappings with MAP_POPULATE or page faults), and memset/memcpy of warm anonymous
memory, the ceiling no file can beat. Ratios are against that memcpy.
"""

from __future__ import annotations

import dataclasses
import mmap
import os
import subprocess
import time
import zlib
from pathlib import Path

import numpy as np

from ..kernels import set_threads, threads
from ..shm import TableStore, checksum, prepared, segment
from ..shm.format import segment_size
from ..shm.prepared import PreparedSegment
from ..tables import TableSpec
from .c_helpers import compile_helper

#: (key printed by shm_publish_floors.c, row label), in the order of the table.
FLOORS = [
    ("pwrite", "floor: `pwrite` of a cache-hot block per block into a new file (no fallocate)"),
    ("fallocate_pwrite", "floor: `posix_fallocate` + the same `pwrite`s (the writer's safe path, nothing computed)"),
    ("fallocate", "floor: `posix_fallocate` alone (tmpfs allocates every 4 KiB page)"),
    ("fallocate_populate", "floor: fallocate + `mmap(MAP_POPULATE)` alone (tmpfs zeroes and maps every page)"),
    ("fallocate_populate_memcpy", "floor: fallocate + `mmap(MAP_POPULATE)` + `memcpy` into the mapping"),
    ("fallocate_fault_memset", "floor: fallocate + `mmap` + `memset` (a page fault zeroes each page)"),
    ("fault_memset", "floor: `ftruncate` + `mmap` + `memset` (a page fault allocates and zeroes each page)"),
    ("memset_warm", "ceiling: `memset` of a warm anonymous buffer"),
    ("memcpy_warm", "ceiling: `memcpy` between two warm anonymous buffers (memory speed)"),
]
MEMCPY_LABEL = dict(FLOORS)["memcpy_warm"]


def _median_s(step, repeats: int, setup=None, teardown=None) -> float:
    """Median seconds of `step(state)` over `repeats` runs; `setup()` makes state untimed."""
    times = []
    for _ in range(repeats):
        state = setup() if setup else None
        t0 = time.perf_counter()
        step(state)
        times.append(time.perf_counter() - t0)
        if teardown:
            teardown(state)
    return float(np.median(times))


def _blocks(table: TableSpec):
    block_rows = min(table.rows, max(1, segment.BLOCK_BYTES // (table.width * table.np_dtype.itemsize)))
    return block_rows, [(lo, min(lo + block_rows, table.rows)) for lo in range(0, table.rows, block_rows)]


def _crc32c_kernel() -> str:
    kernels = checksum.native_kernels()
    return f"native, {kernels[0]}" if kernels and checksum.implementation() == "native" else "numba"


def floor_rows(root: Path, nbytes: int, repeats: int) -> list[tuple[str, float]] | str:
    """[(label, median seconds)] of every floor, or why they were skipped."""
    exe = root / "shm_publish_floors"
    skipped = compile_helper("shm_publish_floors.c", exe)
    if skipped:
        return skipped
    out = subprocess.run([str(exe), str(root), str(nbytes), str(repeats), str(segment.BLOCK_BYTES)],
                         check=True, capture_output=True, text=True)
    seconds = {key: float(value) for key, value in (line.split() for line in out.stdout.splitlines())}
    return [(label, seconds[key]) for key, label in FLOORS]


def prepared_rows(store: TableStore, table: TableSpec, repeats: int, parallel: int) -> list[tuple[str, float]]:
    """[(label, median seconds)] of preparing a segment, publishing into it on `parallel`
    threads and on one, and unmapping it afterwards (each alone, `repeats` times)."""
    prepare_s, publish_s = {parallel: [], 1: []}, {parallel: [], 1: []}
    previous = threads()
    try:
        for _ in range(repeats):
            for count in dict.fromkeys((parallel, 1)):
                set_threads(count)
                t0 = time.perf_counter()
                store.prepare(table)
                t1 = time.perf_counter()
                store.publish("bench-prepared", table)
                publish_s[count].append(time.perf_counter() - t1)
                prepare_s[count].append(t1 - t0)
                store.remove("bench-prepared")
    finally:
        set_threads(previous)

    def used_segment():
        prepared = PreparedSegment(store.root, segment_size(table), 0o600)
        prepared.build(table, "bench-unmap", 1, checksum.CRC32C)
        return prepared, prepared.link(store.root / "bench-unmap")

    def drop(state):
        os.close(state[1])
        os.unlink(store.root / "bench-unmap")

    rows = [(("`TableStore.prepare`: O_TMPFILE, fallocate, MADV_POPULATE_WRITE (before the publish, "
              "or on the store's background thread)"), float(np.median(prepare_s[parallel] + prepare_s[1]))),
            (f"`TableStore.publish` into a prepared segment, CRC-32C, {parallel} threads",
             float(np.median(publish_s[parallel])))]
    if parallel > 1:
        rows.append(("`TableStore.publish` into a prepared segment, CRC-32C, 1 thread", float(np.median(publish_s[1]))))
    rows.append(("after it: unmap the used segment (the store's background thread, after the flip)",
                 _median_s(lambda state: state[0].close(), repeats, used_segment, drop)))
    rows.append((f"prepare + publish ({parallel} threads) + unmap: one publish's work in a `keep_prepared` store",
                 rows[0][1] + rows[1][1] + rows[-1][1]))
    return rows + prepared_stage_rows(store.root, table, repeats)


def prepared_stage_rows(root: Path, table: TableSpec, repeats: int) -> list[tuple[str, float]]:
    """The stages of a one-thread publish into a prepared segment, each alone: computing the
    rows into a populated mapping and checksumming them there afterwards (two passes), and
    both in one pass (segment.fill_checksummed: what a CRC-32C publish runs)."""
    piece_rows = max(1, prepared.PIECE_BYTES_PER_THREAD // (table.width * table.np_dtype.itemsize))
    pieces = [(lo, min(lo + piece_rows, table.rows)) for lo in range(0, table.rows, piece_rows)]

    def populated():
        fd = os.open(root, os.O_TMPFILE | os.O_RDWR, 0o600)
        os.posix_fallocate(fd, 0, table.nbytes)
        mapping = mmap.mmap(fd, table.nbytes, mmap.MAP_SHARED | mmap.MAP_POPULATE, mmap.PROT_READ | mmap.PROT_WRITE)
        return fd, mapping, np.frombuffer(mapping, table.np_dtype).reshape(table.rows, table.width)

    def compute(state):
        for lo, hi in pieces:
            table.fill_block(state[2][lo:hi], lo, hi)

    def filled():
        state = populated()
        compute(state)
        return state

    def read_back(state):
        crc = 0
        for lo, hi in pieces:
            crc = checksum.crc32c(state[2][lo:hi], crc)

    def one_pass(state):
        crc = 0
        for lo, hi in pieces:
            crc = segment.fill_checksummed(table, state[2][lo:hi], lo, hi, checksum.CRC32C, crc)

    def unmap(state):
        fd, mapping, _ = state
        segment.close_mapping(mapping)  # now, or once the view in `state` is gone
        os.close(fd)

    per_thread = prepared.PIECE_BYTES_PER_THREAD >> 20
    return [((f"stage, prepared, 1 thread: compute the rows into the populated mapping ({per_thread} MiB pieces, "
              "non-temporal stores)"), _median_s(compute, repeats, populated, unmap)),
            ("stage, prepared, 1 thread: CRC-32C of those rows, read back from memory",
             _median_s(read_back, repeats, filled, unmap)),
            (f"stage, prepared, 1 thread: the rows and their CRC-32C in one pass ({_one_pass_label(table)})",
             _median_s(one_pass, repeats, populated, unmap))]


def _one_pass_label(table: TableSpec) -> str:
    """How segment.fill_checksummed computes this table's rows and CRC-32C here."""
    block = np.empty((1, table.width), table.np_dtype)
    if table.fill_block_crc32c(block, 0, 1, 0) is None:
        return "not available here: computed, then checksummed"
    return "native `sincos_rows_crc`: each 8 KiB tile checksummed in L1, then streamed out"


def publish_rows(root: Path, table: TableSpec, repeats: int, parallel: int = 1) -> list[tuple[str, float]]:
    """[(label, median seconds)] of a publish, its stages, publishes into prepared segments
    (on `parallel` threads and on one), and the floors (when a C compiler is here)."""
    nbytes = table.nbytes
    block_rows, blocks = _blocks(table)
    buffer = np.empty((block_rows, table.width), table.np_dtype)
    table.fill_block(buffer, 0, block_rows)  # compile and warm
    hot = buffer.copy()
    scratch = root / "bench-file"
    one_row = dataclasses.replace(table, stop=table.start + 1)

    def new_file(_=None):
        return os.open(scratch, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)

    def drop_file(fd):
        os.close(fd)
        os.unlink(scratch)

    def reserved_file():
        fd = new_file()
        os.posix_fallocate(fd, 0, nbytes)
        return fd

    def pwrite_all(fd):
        for lo, hi in blocks:
            segment._pwrite_all(fd, hot[:hi - lo], lo * hot.shape[1] * hot.itemsize)

    def compute(_):
        for lo, hi in blocks:
            table.fill_block(buffer[:hi - lo], lo, hi)

    def compute_checksummed(_):
        crc = 0
        for lo, hi in blocks:
            crc = segment.fill_checksummed(table, buffer[:hi - lo], lo, hi, checksum.CRC32C, crc)

    def block_checksums(function):
        def run(_):
            crc = 0
            for lo, hi in blocks:
                crc = function(hot[:hi - lo], crc)
        return run

    stores = {"crc32c": TableStore(root), "crc32": TableStore(root, checksum="crc32")}

    def publish(store, what=table):
        return store.publish("bench-publish", what)

    def unpublish(store):
        store.remove("bench-publish")

    publish(stores["crc32c"])  # warm: numba, the native library, the registry
    unpublish(stores["crc32c"])
    rows = []
    try:
        for label, name in (("`TableStore.publish`, CRC-32C (the default)", "crc32c"),
                            ("`TableStore.publish`, CRC-32 (`checksum=\"crc32\"`)", "crc32")):
            rows.append((label, _median_s(publish, repeats, setup=lambda: stores[name], teardown=unpublish)))
        rows += prepared_rows(stores["crc32c"], table, repeats, parallel)
        mib = segment.BLOCK_BYTES >> 20
        fallocate = ("stage: `posix_fallocate` of a new file",
                     _median_s(lambda fd: os.posix_fallocate(fd, 0, nbytes), repeats, new_file, drop_file))
        one_pass = (f"stage: the rows and their CRC-32C in one pass ({mib} MiB blocks; {_one_pass_label(table)})",
                    _median_s(compute_checksummed, repeats))
        pwrite = ("stage: `pwrite` of every block into the reserved file",
                  _median_s(pwrite_all, repeats, reserved_file, drop_file))
        fixed = ("stage: create, header, READY, registry flip, unlink the old generation (a one-row publish)",
                 _median_s(lambda store: publish(store, one_row), repeats, lambda: stores["crc32c"], unpublish))
        rows += [fallocate,
                 (f"stage: compute the rows ({mib} MiB blocks, one buffer)", _median_s(compute, repeats)),
                 (f"stage: CRC-32C of the blocks ({_crc32c_kernel()})",
                  _median_s(block_checksums(checksum.crc32c), repeats)),
                 one_pass, pwrite, fixed,
                 ("sum of the stages a CRC-32C publish runs (fallocate, rows + CRC in one pass, pwrite, fixed cost)",
                  sum(seconds for _, seconds in (fallocate, one_pass, pwrite, fixed)))]
        rows += [(f"stage, other checksums: CRC-32C of the blocks (native, {kernel} kernel)",
                  _median_s(block_checksums(lambda data, crc, kernel=kernel: checksum.crc32c_by(kernel, data, crc)),
                            repeats))
                 for kernel in checksum.native_kernels()[1:]]
        rows += [
            ("stage, other checksums: CRC-32C of the blocks (numba, no native library)",
             _median_s(block_checksums(lambda data, crc: checksum.crc32c(data, crc, native=False)), repeats)),
            ("stage, other checksums: CRC-32 (zlib) of the blocks", _median_s(block_checksums(zlib.crc32), repeats)),
        ]
    finally:
        for each in stores.values():
            each.close()
    floors = floor_rows(root, nbytes, repeats)
    if isinstance(floors, str):
        return rows + [(f"floors: {floors}", float("nan"))]
    return rows + floors
