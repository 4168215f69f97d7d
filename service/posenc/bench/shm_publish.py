"""The publish rows of `posenc bench shm`: a whole `TableStore.publish` of the benchmark
table, each of its steps timed alone on the same bytes, and memset/memcpy of as many bytes,
all in one run, so the table says where the time goes and how far it is from memory speed.

Steps, as segment.create/fill do them: `posix_fallocate` of a new file; the rows computed
block by block into one cache-sized buffer; the block checksums (CRC-32C native, CRC-32C
without the native library, zlib's CRC-32); the `pwrite` of every block into a reserved
file. "fallocate + pwrite" is the file system's own floor: publishing any table of this
size into this directory costs at least that much, even with the rows and checksums free.
"""

from __future__ import annotations

import ctypes
import os
import time
import zlib
from pathlib import Path

import numpy as np

from ..shm import TableStore, checksum, segment
from ..tables import TableSpec

_libc = ctypes.CDLL(None)
_libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
_libc.memcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]


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


def publish_rows(root: Path, table: TableSpec, repeats: int) -> list[tuple[str, float]]:
    """[(label, median seconds)] of a publish, its steps and the memory baselines."""
    nbytes = table.nbytes
    block_rows, blocks = _blocks(table)
    buffer = np.empty((block_rows, table.width), table.np_dtype)
    table.fill_block(buffer, 0, block_rows)  # compile and warm
    hot = buffer.copy()
    scratch = root / "bench-file"

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

    def block_checksums(function):
        def run(_):
            crc = 0
            for lo, hi in blocks:
                crc = function(hot[:hi - lo], crc)
        return run

    stores = {"crc32c": TableStore(root), "crc32": TableStore(root, checksum="crc32")}

    def publish(store):
        return store.publish("bench-publish", table)

    def unpublish(store):
        store.remove("bench-publish")

    publish(stores["crc32c"])  # warm: numba, the native library, the registry
    unpublish(stores["crc32c"])
    memory = np.ones(nbytes, np.uint8)
    copy = np.ones(nbytes, np.uint8)
    rows = []
    try:
        for label, name in (("`TableStore.publish`, CRC-32C (the default)", "crc32c"),
                            ("`TableStore.publish`, CRC-32 (`checksum=\"crc32\"`)", "crc32")):
            rows.append((label, _median_s(publish, repeats, setup=lambda: stores[name], teardown=unpublish)))
        rows += [
            ("step: `posix_fallocate` of a new file", _median_s(lambda fd: os.posix_fallocate(fd, 0, nbytes), repeats,
                                                                new_file, drop_file)),
            ("step: compute the rows (1 MiB blocks, one buffer)", _median_s(compute, repeats)),
            (f"step: CRC-32C of the blocks ({checksum.implementation()})",
             _median_s(block_checksums(checksum.crc32c), repeats)),
            ("step: CRC-32C of the blocks (numba, no native library)",
             _median_s(block_checksums(lambda data, crc: checksum.crc32c(data, crc, native=False)), repeats)),
            ("step: CRC-32 (zlib) of the blocks", _median_s(block_checksums(zlib.crc32), repeats)),
            ("step: `pwrite` of every block into the reserved file", _median_s(pwrite_all, repeats, reserved_file,
                                                                               drop_file)),
            ("floor: fallocate + pwrite (no compute, no checksum)",
             _median_s(lambda fd: (os.posix_fallocate(fd, 0, nbytes), pwrite_all(fd)), repeats, new_file, drop_file)),
            ("baseline: `memset` of as many bytes (pages already mapped)",
             _median_s(lambda _: _libc.memset(memory.ctypes.data, 7, nbytes), repeats)),
            ("baseline: `memcpy` of as many bytes",
             _median_s(lambda _: _libc.memcpy(copy.ctypes.data, memory.ctypes.data, nbytes), repeats)),
        ]
    finally:
        for each in stores.values():
            each.close()
    return rows
