"""A prepared segment: a segment file made ready for a publish before the publish starts.

On tmpfs most of a cold publish is the kernel allocating, zeroing and mapping the file's
pages, not the rows: for 64 MiB, `posix_fallocate` plus `mmap(MAP_POPULATE)` alone cost
more than twice computing and checksumming the rows. A prepared segment pays that ahead
of time, off the publish's critical path: an unnamed file in the shm directory
(`O_TMPFILE`: a crash leaves nothing behind), build-locked, its mode set, every byte
reserved with `posix_fallocate` (a full tmpfs fails here, never with a SIGBUS later) and
mapped shared and populated for writing, so every page is allocated, zeroed and mapped. A
publish into it then only computes rows into memory (`build`: piece by piece, the CRC
chained across pieces; for CRC-32C sinusoidal and RoPE tables in one pass, each tile of
rows checksummed in cache before it is streamed into the mapping, `segment.fill_checksummed`),
writes the header, stores READY and links the finished file under its generation name
(`link`).

The file's bytes are exactly a cold publish's; only the way they get there differs
(docs/shm-format.md, *Publishing into a prepared segment*). A prepared segment holds as
much tmpfs as the table it will carry until it is used or closed.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import time
from pathlib import Path

import numpy as np

from ..kernels.parallel import threads
from ..tables import TableSpec
from .errors import ShmError
from .format import pack_header
from .segment import close_mapping, fill_checksummed, lock_and_reserve, seal

MADV_DONTNEED, MADV_POPULATE_WRITE = 4, 23  # <sys/mman.h>; POPULATE_WRITE since Linux 5.14
_libc = ctypes.CDLL(None, use_errno=True)
_libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]

#: Rows are computed in pieces of this many bytes per kernel thread (`TableSpec.fill_block`
#: splits a piece across them): each thread's share is big enough that the native kernels
#: write it with non-temporal stores (they do from 8 MiB per call on), the pieces few enough
#: that their hand-offs are noise, and `progress` still ticks a few times for 64 MiB. Each
#: piece is checksummed as it is written (the one-pass kernel, on one thread: the work is
#: memory-bound) or right after, the CRC chained piece to piece.
PIECE_BYTES_PER_THREAD = 8 << 20


class PreparedSegment:
    """An unnamed, build-locked, reserved and fully mapped file of `file_size` bytes in
    `directory`, all zero, waiting for one publish. Not shared between threads: a store
    hands it to one publish (or closes it) under its own lock."""

    def __init__(self, directory: Path, file_size: int, mode: int):
        self.directory = Path(directory)
        self.file_size = file_size
        if not hasattr(os, "O_TMPFILE"):
            raise ShmError("table", "prepared segments need O_TMPFILE (Linux 3.11 or later)")
        try:
            self._fd = os.open(self.directory, os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, mode)
        except OSError as exc:
            raise ShmError("table", f"cannot prepare a segment in {self.directory}: {exc.strerror} "
                           "(it needs a filesystem with O_TMPFILE: tmpfs, ext4, xfs, btrfs)") from None
        try:
            lock_and_reserve(self._fd, mode, file_size, self.directory, "a prepared segment")
            self._mapping = _populated_mapping(self._fd, file_size)
        except OSError as exc:
            os.close(self._fd)
            raise ShmError("table", f"cannot map a prepared segment in {self.directory}: {exc.strerror}") from None
        except BaseException:
            os.close(self._fd)
            raise

    def build(self, table: TableSpec, name: str, generation: int, algorithm: int, progress=None) -> None:
        """Write generation `generation` of `name` holding `table` into the file, READY last.

        The rows go straight into the mapping, piece by piece, each with its checksum
        (`segment.fill_checksummed`); `progress` is called after each piece, on this thread,
        once the kernels writing it have returned (so an exception from it never leaves one
        writing). Then the header, the checksums and READY, as `segment.fill` does for a
        cold segment."""
        prefix = pack_header(table, name, generation, time.time_ns(), os.getpid(), algorithm)
        if len(prefix) + table.nbytes != self.file_size:
            raise ShmError("table", f"a prepared segment of {self.file_size} bytes cannot hold a table of "
                           f"{len(prefix) + table.nbytes}")
        data = np.frombuffer(self._mapping, table.np_dtype, table.rows * table.width, len(prefix))
        data = data.reshape(table.rows, table.width)
        piece_rows = max(1, PIECE_BYTES_PER_THREAD * threads() // (table.width * table.np_dtype.itemsize))
        crc = 0
        for lo in range(0, table.rows, piece_rows):
            hi = min(lo + piece_rows, table.rows)
            crc = fill_checksummed(table, data[lo:hi], lo, hi, algorithm, crc)
            if progress is not None:
                progress(hi, table.rows)
        del data  # the mapping can be closed once no view of it is left
        self._mapping[:len(prefix)] = prefix
        seal(self._mapping, crc)

    def link(self, path: Path) -> int:
        """Give the file its name `path` and return its fd, build lock held, to the caller,
        which owns it from now on (`close` then only drops the mapping). The file is never
        visible before it is complete. Raises ShmError if the name exists or the link fails."""
        # linkat(AT_SYMLINK_FOLLOW) of the /proc magic link: os.link passes that flag only on
        # its linkat path, which a dir fd selects (plain link(2) would link the symlink itself).
        directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.link(f"/proc/self/fd/{self._fd}", path.name, dst_dir_fd=directory)
        except OSError as exc:
            raise ShmError("table", f"cannot link a prepared segment as {path}: {exc.strerror}") from None
        finally:
            os.close(directory)
        fd, self._fd = self._fd, -1
        return fd

    def close(self) -> None:
        """Drop the mapping and, unless it was linked and handed over, the file (the kernel
        frees an unnamed file's pages with its last fd). Idempotent. Takes milliseconds for
        a big table (the kernel unmaps every page), without holding the GIL for most of
        it: a store runs it on its background thread."""
        if self._mapping is not None:
            _advise(self._mapping, MADV_DONTNEED)  # the page-table teardown, GIL released
            close_mapping(self._mapping)
            self._mapping = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _populated_mapping(fd: int, size: int) -> mmap.mmap:
    """A shared read-write mapping of the whole file with every page allocated, zeroed and
    mapped writable: madvise(MADV_POPULATE_WRITE) through ctypes, which releases the GIL
    (mmap's MAP_POPULATE holds it) and ran faster here; MAP_POPULATE on kernels before 5.14."""
    mapping = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    try:
        populated = _advise(mapping, MADV_POPULATE_WRITE)
    except BaseException:
        close_mapping(mapping)
        raise
    if populated:
        return mapping
    close_mapping(mapping)
    return mmap.mmap(fd, size, mmap.MAP_SHARED | mmap.MAP_POPULATE, mmap.PROT_READ | mmap.PROT_WRITE)


def _advise(mapping: mmap.mmap, advice: int) -> bool:
    """madvise the whole mapping; False where the kernel does not know `advice` (EINVAL)."""
    address = ctypes.addressof(ctypes.c_char.from_buffer(mapping))  # the temporary export ends here
    if _libc.madvise(address, len(mapping), advice) == 0:
        return True
    error = ctypes.get_errno()
    if error == errno.EINVAL:
        return False
    raise OSError(error, os.strerror(error))
