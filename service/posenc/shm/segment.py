"""One segment file: create + fill + publish it (writer), map + validate it (reader).

The writer reserves every byte with `posix_fallocate` before mapping, so a full tmpfs is
an error here and never a SIGBUS later, and holds an exclusive `flock` on the file for as
long as it owns it: a segment whose lock is free and that the registry does not name was
left by a writer that died (`TableStore.reclaim`). Readers map read-only and never lock.
"""

from __future__ import annotations

import errno
import fcntl
import mmap
import os
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import numba as nb
import numpy as np

from ..tables import TableSpec
from .atomics import load_acquire, store_release
from .errors import ShmError
from .format import (
    HEADER_SIZE,
    READY,
    STATE_NAMES,
    STATE_WORD,
    Header,
    check_complete,
    check_data,
    data_offset_for,
    pack_header,
    set_checksums,
    spec_of,
    unpack_header,
)

#: Rows are computed and checksummed in blocks of about this many bytes (cache-warm CRC, progress ticks).
BLOCK_BYTES = 4 << 20


@nb.njit(nogil=True, cache=True)
def _store_state(words, state):
    store_release(words, STATE_WORD, state)


@nb.njit(nogil=True, cache=True)
def _load_state(words):
    return load_acquire(words, STATE_WORD)


def create(path: Path, table: TableSpec, name: str, generation: int, mode: int) -> int:
    """Create `path` (state BUILDING, space reserved) and return its fd, flocked by us."""
    prefix = pack_header(table, name, generation, time.time_ns(), os.getpid())
    file_size = unpack_header(prefix, str(path)).file_size
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, mode)
    except OSError as exc:
        raise ShmError("table", f"cannot create {path}: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.fchmod(fd, mode)
        os.pwrite(fd, prefix, 0)
        os.posix_fallocate(fd, 0, file_size)
    except OSError as exc:
        discard(path, fd)
        if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.ENOMEM):
            raise ShmError("table", f"not enough space in {path.parent} for table {name!r}: it needs "
                           f"{file_size} bytes, {_free_bytes(path.parent)} are free "
                           f"({exc.strerror}); nothing was published") from None
        raise ShmError("table", f"cannot reserve space for {path}: {exc.strerror}") from None
    except BaseException:
        discard(path, fd)
        raise
    return fd


def fill(fd: int, table: TableSpec, progress=None) -> None:
    """Compute every row into the segment block by block, store the CRCs, then state READY."""
    size = os.fstat(fd).st_size
    mapping = mmap.mmap(fd, size, mmap.MAP_SHARED | mmap.MAP_POPULATE, mmap.PROT_READ | mmap.PROT_WRITE)
    try:
        offset = data_offset_for(len(table.canonical_json.encode()))
        data = np.frombuffer(mapping, table.np_dtype, table.rows * table.width, offset)
        data = data.reshape(table.shape)
        block_rows = max(1, BLOCK_BYTES // (table.width * table.np_dtype.itemsize))
        crc = 0
        for lo in range(0, table.rows, block_rows):
            hi = min(lo + block_rows, table.rows)
            table.fill(data, lo, hi)
            crc = zlib.crc32(data[lo:hi], crc)
            if progress is not None:
                progress(hi, table.rows)
        del data
        set_checksums(mapping, crc)
        # Release store: every write above is visible to a reader that sees READY.
        _store_state(np.frombuffer(mapping, np.uint32, HEADER_SIZE // 4), READY)
    finally:
        close_mapping(mapping)


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
    data: np.ndarray


def open_ready(path: Path, *, verify: bool) -> Mapped:
    """Map `path` read-only and refuse anything that is not a complete, READY v1 segment.

    `verify` also recomputes the data CRC (about 3.5 GB/s). Raises FileNotFoundError if
    the file is gone (the caller re-reads the registry)."""
    where = str(path)
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
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
                           "its writer has not finished, or died building it")
        check_complete(mapping, header, where)
        spec = spec_of(mapping, header, where)
        data = np.frombuffer(mapping, spec.np_dtype, header.rows * header.width, header.data_offset)
        data = data.reshape(header.rows, header.width)
        if verify:
            check_data(data, header, where)
    except BaseException:
        data = None
        close_mapping(mapping)
        raise
    return Mapped(mapping, header, spec, data)
