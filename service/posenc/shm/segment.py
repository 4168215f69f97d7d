"""One segment file: create + fill + publish it (writer), map + validate it (reader).

The writer reserves every byte with `posix_fallocate` first, so a full tmpfs is an error
before any work and never a SIGBUS, and holds an exclusive `flock` on the file for as long
as it owns it: a segment whose lock is free and that the registry does not name was left
by a writer that died (`TableStore.reclaim`). Readers map read-only and never lock.

Rows are computed block by block into one reused, cache-sized buffer, checksummed there
while hot (CRC-32C of sinusoidal and RoPE rows as the kernel writes them: `fill_checksummed`)
and copied into the file with `pwrite`. That writes every data byte of the file
exactly once: a writable mapping would have the kernel zero each page on its first touch
(tmpfs pages reserved by fallocate are cleared lazily) and the rows overwrite it, two
passes over memory. Only the header page is mapped, for the checksums and the release
store of READY. (A prepared segment, prepared.py, is the other way round: its pages are
allocated, zeroed and mapped before the publish, which then writes rows into the mapping.)
"""

from __future__ import annotations

import errno
import fcntl
import mmap
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..native import BINDING
from ..tables import TableSpec
from . import checksum
from .errors import ShmError
from .format import (
    HEADER_SIZE,
    READY,
    STATE_NAMES,
    Header,
    check_complete,
    check_data,
    data_offset_for,
    pack_header,
    set_checksums,
    spec_block,
    spec_of,
    unpack_header,
)

# The READY flag's release store and acquire load: the native binding's, else numba's.
if BINDING is not None:
    _store_state, _load_state = BINDING.segment_store_state, BINDING.segment_load_state
else:
    from .seqlock import load_state as _load_state, store_state as _store_state

#: Rows are computed, checksummed and written in blocks of about this many bytes: small enough
#: to stay in a core's L2 between the three steps, big enough that Python's per-block cost is
#: noise. Progress ticks once per block.
BLOCK_BYTES = 1 << 20


def create(path: Path, table: TableSpec, name: str, generation: int, mode: int, algorithm: int) -> int:
    """Create `path` (state BUILDING, space reserved) and return its fd, flocked by us."""
    prefix = pack_header(table, name, generation, time.time_ns(), os.getpid(), algorithm)
    file_size = unpack_header(prefix, str(path)).file_size
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, mode)
    except OSError as exc:
        raise ShmError("table", f"cannot create {path}: {exc.strerror}") from None
    try:
        lock_and_reserve(fd, mode, file_size, path.parent, f"table {name!r}")
        _pwrite_all(fd, prefix, 0)
    except OSError as exc:
        discard(path, fd)
        raise ShmError("table", f"cannot write {path}: {exc.strerror}") from None
    except BaseException:
        discard(path, fd)
        raise
    return fd


def lock_and_reserve(fd: int, mode: int, file_size: int, directory: Path, what: str) -> None:
    """Take the build lock on a new segment file, set its mode and reserve all its space.

    A full filesystem is a ShmError here ("not enough space in DIR for WHAT ... nothing was
    published"), before any work and never a SIGBUS later."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.fchmod(fd, mode)
        os.posix_fallocate(fd, 0, file_size)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.ENOMEM):
            raise ShmError("table", f"not enough space in {directory} for {what}: it needs {file_size} bytes, "
                           f"{_free_bytes(directory)} are free ({exc.strerror}); nothing was published") from None
        raise ShmError("table", f"cannot reserve space in {directory} for {what}: {exc.strerror}") from None


def fill(fd: int, table: TableSpec, algorithm: int, progress=None) -> None:
    """Compute every row into the segment block by block, store the checksums, then READY.
    A computed table's data is its spec block alone."""
    offset = data_offset_for(len(table.canonical_json.encode()))
    if table.computed:
        block = np.frombuffer(spec_block(table), np.uint8)
        _pwrite_all(fd, block, offset)
        mark_ready(fd, offset, checksum.compute(algorithm, block))
        return
    row_bytes = table.width * table.np_dtype.itemsize
    block_rows = min(table.rows, max(1, BLOCK_BYTES // row_bytes))
    buffer = np.empty((block_rows, table.width), table.np_dtype)
    crc = 0
    for lo in range(0, table.rows, block_rows):
        hi = min(lo + block_rows, table.rows)
        block = buffer[:hi - lo]
        crc = fill_checksummed(table, block, lo, hi, algorithm, crc)
        _pwrite_all(fd, block, offset + lo * row_bytes)
        if progress is not None:
            progress(hi, table.rows)
    mark_ready(fd, offset, crc)


def fill_checksummed(table: TableSpec, block: np.ndarray, lo: int, hi: int, algorithm: int, crc: int) -> int:
    """Compute rows lo..hi into `block` and return the data checksum continued over them: for
    CRC-32C in the same pass where the table's kernel can (TableSpec.fill_block_crc32c: one
    thread, each tile checksummed in L1 as it is written), else computed, then checksummed."""
    if algorithm == checksum.CRC32C:
        fused = table.fill_block_crc32c(block, lo, hi, crc)
        if fused is not None:
            return fused
    table.fill_block(block, lo, hi)
    return checksum.compute(algorithm, block, crc)


def _pwrite_all(fd: int, data, offset: int) -> None:
    """pwrite every byte (a write may be cut short; the space is reserved, so it never fails for room)."""
    view = memoryview(data).cast("B")
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


def mark_ready(fd: int, data_offset: int, data_crc: int) -> None:
    """Seal a segment written with pwrite: map its header page and `seal` it there."""
    mapping = mmap.mmap(fd, data_offset, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    try:
        seal(mapping, data_crc)
    finally:
        close_mapping(mapping)


def seal(mapping, data_crc: int) -> None:
    """Store the data checksum, then the header CRC, then state READY with a release store:
    every write before it (the rows' pwrites, or stores into a mapping by any thread that
    has been joined) is visible to a reader that sees READY."""
    set_checksums(mapping, data_crc)
    _store_state(np.frombuffer(mapping, np.uint32, HEADER_SIZE // 4), READY)


def discard(path: Path, fd: int) -> None:
    """Unlink a segment we are building and drop our fd (and with it the build lock)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    os.close(fd)


def close_mapping(mapping: mmap.mmap) -> None:
    """Unmap now, or when the last numpy view of it dies (a view or a traceback may hold one)."""
    try:
        mapping.close()
    except BufferError:
        pass


def _free_bytes(root: Path) -> int:
    st = os.statvfs(root)
    return st.f_bavail * st.f_frsize


@dataclass
class Mapped:
    """A validated READY segment mapped read-only."""

    mapping: mmap.mmap
    header: Header
    spec: TableSpec
    data: np.ndarray  # [rows, width] of the spec's dtype; a computed table's spec block as bytes


def open_ready(path: Path, *, verify: bool) -> Mapped:
    """Map `path` read-only and refuse anything that is not a complete, READY v1 segment.

    `verify` also recomputes the data checksum. Raises FileNotFoundError if the file is gone
    (the caller re-reads the registry); any other failure to open it is a ShmError."""
    where = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ShmError("segment", f"{where}: cannot open: {exc.strerror}") from None
    try:
        size = os.fstat(fd).st_size
        if size < HEADER_SIZE:
            raise ShmError("segment", f"{where}: truncated: {size} bytes, a header needs {HEADER_SIZE}")
        mapping = mmap.mmap(fd, size, mmap.MAP_SHARED | mmap.MAP_POPULATE, mmap.PROT_READ)
    finally:
        os.close(fd)
    try:
        # Acquire load first: the header and data we read next were written before READY.
        state = int(_load_state(np.frombuffer(mapping, np.uint32, HEADER_SIZE // 4)))
        header = unpack_header(mapping, where)
        if state != READY:
            raise ShmError("segment", f"{where}: not READY (state {STATE_NAMES.get(state, state)}): "
                           "being written, or its writer died")
        check_complete(mapping, header, where)
        spec = spec_of(mapping, header, where)
        if spec.computed:  # no rows: the spec block (checked against the spec JSON by spec_of)
            data = np.frombuffer(mapping, np.uint8, header.data_nbytes, header.data_offset)
        else:
            data = np.frombuffer(mapping, spec.np_dtype, header.rows * header.width, header.data_offset)
            data = data.reshape(header.rows, header.width)
        if verify:
            check_data(data, header, where)
    except BaseException:
        data = None
        close_mapping(mapping)
        raise
    return Mapped(mapping, header, spec, data)
