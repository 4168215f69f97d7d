"""`TableStore`: the writer side. Publishes table generations, flips the registry, removes
tables, reclaims what dead writers left, and unlinks everything it owns on `close()`."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from ..errors import PosencError
from ..tables import TableSpec
from . import segment
from .checksum import DEFAULT as DEFAULT_CHECKSUM, code_of as checksum_code
from .errors import ShmError
from .listing import TableInfo, describe_fd, list_tables
from .paths import check_name, resolve_root, segment_file, segment_files
from .registry import LOCK_TIMEOUT_S, RegistryWriter


class TableStore:
    """Owns the tables it publishes in one shm directory (root None: $POSENC_SHM_DIR or
    /dev/shm). Segments are created with `mode` (default 0640); the registry is created with
    it too, and every publish widens the registry's read bits to the table's (readers of a
    table must be able to find it). `checksum` is the data checksum of new segments:
    "crc32c" (default, hardware-accelerated) or "crc32" (zlib's, for readers that predate
    the `checksum` field). A writer waits at most `lock_timeout_s` for the registry lock,
    then raises ShmError naming the holder. Tables outlive the store unless `close()` is
    called: a process that publishes and exits (the CLI) leaves them for readers. Safe to
    share between threads; any number of stores (in any processes) may write to one
    directory, and when two publish the same name the last flip wins."""

    def __init__(self, root=None, *, mode: int = 0o640, checksum: str = DEFAULT_CHECKSUM,
                 lock_timeout_s: float = LOCK_TIMEOUT_S):
        if isinstance(mode, bool) or not isinstance(mode, int) or not 0 <= mode <= 0o777:
            raise PosencError("mode", f"must be permission bits 0..0o777, got {mode!r}")
        if isinstance(lock_timeout_s, bool) or not isinstance(lock_timeout_s, (int, float)) \
                or not 0 <= lock_timeout_s <= 86400:
            raise PosencError("lock_timeout_s", f"must be seconds in 0..86400, got {lock_timeout_s!r}")
        self.root = resolve_root(root)
        self.mode = mode
        self.checksum = checksum
        self._algorithm = checksum_code(checksum)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ShmError("registry", f"cannot create the shm directory {self.root}: {exc.strerror}") from None
        self._registry = RegistryWriter(self.root, mode, lock_timeout_s)
        self._owned: dict[str, tuple[int, int]] = {}  # name -> (generation, fd holding the segment's flock)
        self.reclaim()

    def _path(self, name: str, generation: int) -> Path:
        return self.root / segment_file(name, generation)

    def publish(self, name: str, table: TableSpec, *, progress=None) -> TableInfo:
        """Build `table` as a new generation of `name`, mark it READY, point the registry at it
        and unlink the generation it replaces. `progress(done_rows, total_rows)` is called
        after each block. On any error (no space, Ctrl-C) the new segment is unlinked and
        the previous generation stays published."""
        name = check_name(name)
        if not isinstance(table, TableSpec):
            raise PosencError("table", f"must be a posenc.tables.TableSpec, got {type(table).__name__}")
        self._check_open()
        self.reclaim()
        with self._registry.locked() as registry:
            if not registry.has_room(name):
                raise ShmError("name", f"cannot publish {name!r}: the registry is full; remove a table first")
            registry.allow_readers(self.mode)
            generation = registry.allocate_generation()
            # Created and flocked under the registry lock: reclaim never sees it unlocked.
            path = self._path(name, generation)
            fd = segment.create(path, table, name, generation, self.mode, self._algorithm)
        try:
            segment.fill(fd, table, self._algorithm, progress)
            # Described from our fd, not the path: once flipped, another store may replace and unlink it.
            info = describe_fd(fd, path, name, generation)
            with self._registry.locked() as registry:
                previous = registry.set(name, generation)  # the flip: readers now attach this generation
                replaced = self._owned.pop(name, None)
                self._owned[name] = (generation, fd)
        except BaseException:
            segment.discard(path, fd)
            raise
        if replaced is not None:
            os.close(replaced[1])
        if previous is not None:
            _unlink(self._path(name, previous))
        return info

    def remove(self, name: str) -> None:
        """Unpublish `name` and unlink its segment (readers that attached it keep their mapping)."""
        name = check_name(name)
        self._check_open()
        with self._registry.locked() as registry:
            generation = registry.clear(name)
            if generation is None:
                raise ShmError("name", f"no table named {name!r} in {self.root}")
            self._unlink(name, generation)

    def list(self) -> list[TableInfo]:
        return list_tables(self.root)

    def reclaim(self) -> int:
        """Unlink segments the registry does not name and no live writer holds (a writer that
        died mid-build, or between READY and the registry flip). Returns how many."""
        self._check_open()
        reclaimed = 0
        with self._registry.locked() as registry:
            current = registry.entries()
            for name, generation, path in segment_files(self.root):
                if current.get(name) == generation or self._owned.get(name, (0,))[0] == generation:
                    continue
                if _abandoned(path):
                    reclaimed += 1
        return reclaimed

    def close(self) -> None:
        """Unpublish and unlink every table this store still owns (clean shutdown). Idempotent."""
        if self._registry is None:
            return
        with self._registry.locked() as registry:
            for name, (generation, _) in list(self._owned.items()):
                if registry.generation(name) == generation:
                    registry.clear(name)
                self._unlink(name, generation)
        self._registry.close()
        self._registry = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _check_open(self) -> None:
        if self._registry is None:
            raise ShmError("table", "this TableStore is closed")

    def _unlink(self, name: str, generation: int) -> None:
        """Unlink one generation's file and release our lock on it if we built it."""
        _unlink(self._path(name, generation))
        owned = self._owned.get(name)
        if owned is not None and owned[0] == generation:
            del self._owned[name]
            os.close(owned[1])


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass  # already removed (by another store, or by hand)


def _abandoned(path: Path) -> bool:
    """Unlink `path` if no process holds its build lock; True if it did."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return False  # gone already, or not ours to read
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.unlink(path)
    except BlockingIOError:
        return False  # its writer is alive and still building
    except FileNotFoundError:
        return False  # another store unlinked it meanwhile (a replaced generation: it does so unlocked)
    finally:
        os.close(fd)
    return True
