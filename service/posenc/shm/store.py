"""`TableStore`: the writer side. Publishes table generations, flips the registry, removes
tables, reclaims what dead writers left, and unlinks everything it owns on `close()`."""

from __future__ import annotations

import fcntl
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from ..errors import PosencError
from ..tables import TableSpec
from . import segment
from .checksum import DEFAULT as DEFAULT_CHECKSUM, code_of as checksum_code
from .errors import ShmError
from .format import segment_size
from .listing import TableInfo, describe_fd, list_tables
from .locks import LOCK_TIMEOUT_S
from .paths import check_name, resolve_root, segment_file, segment_files
from .prepared import PreparedSegment
from .registry import RegistryWriter


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
    directory, and when two publish the same name the last flip wins.

    A store may hold one *prepared segment* (`prepare`, docs/shm-format.md): a file of one
    table's size whose pages are already allocated, zeroed and mapped, so the next publish
    of that size only computes rows (2-3x faster for 64 MiB on tmpfs). It holds as much
    memory as that table until used or `close()`. `keep_prepared=True` prepares the next
    one on a background thread after every publish, for the size just published: a table
    then takes twice its size in tmpfs. Off by default."""

    def __init__(self, root=None, *, mode: int = 0o640, checksum: str = DEFAULT_CHECKSUM,
                 lock_timeout_s: float = LOCK_TIMEOUT_S, keep_prepared: bool = False):
        if isinstance(mode, bool) or not isinstance(mode, int) or not 0 <= mode <= 0o777:
            raise PosencError("mode", f"must be permission bits 0..0o777, got {mode!r}")
        if isinstance(lock_timeout_s, bool) or not isinstance(lock_timeout_s, (int, float)) \
                or not 0 <= lock_timeout_s <= 86400:
            raise PosencError("lock_timeout_s", f"must be seconds in 0..86400, got {lock_timeout_s!r}")
        if not isinstance(keep_prepared, bool):
            raise PosencError("keep_prepared", f"must be True or False, got {keep_prepared!r}")
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
        self.keep_prepared = keep_prepared
        self._prepared: PreparedSegment | None = None
        # One background thread, started on first use: keep_prepared's preparations, and
        # unmapping used prepared segments (milliseconds for a big table) after their publish.
        self._background: ThreadPoolExecutor | None = None
        self._preparing: Future | None = None  # keep_prepared's preparation in flight
        self._prepared_lock = threading.Lock()  # guards the three above and _accepting
        self._accepting = True  # False once close() starts: a late preparation is dropped
        self.reclaim()

    def _path(self, name: str, generation: int) -> Path:
        return self.root / segment_file(name, generation)

    def publish(self, name: str, table: TableSpec, *, progress=None) -> TableInfo:
        """Build `table` as a new generation of `name`, mark it READY, point the registry at it
        and unlink the generation it replaces. `progress(done_rows, total_rows)` is called
        as rows are done. On any error (no space, Ctrl-C) the new segment is unlinked and
        the previous generation stays published. Uses the prepared segment if it has
        `table`'s size (and drops it either way once used)."""
        name = check_name(name)
        if not isinstance(table, TableSpec):
            raise PosencError("table", f"must be a posenc.tables.TableSpec, got {type(table).__name__}")
        self._check_open()
        self.reclaim()
        # a computed table's segment is a few hundred bytes: written in place, no prepared one taken
        prepared = None if table.computed else self._take_prepared(segment_size(table))
        try:
            generation, path, fd = self._build(name, table, prepared, progress)
            try:
                # Described from our fd, not the path: once flipped, another store may replace and unlink it.
                info = describe_fd(fd, path, name, generation)
                with self._registry.locked() as registry:
                    previous = registry.set(name, generation)  # the flip: readers now attach this generation
                    replaced = self._owned.pop(name, None)
                    self._owned[name] = (generation, fd)
            except BaseException:
                segment.discard(path, fd)
                raise
        finally:
            if prepared is not None:
                self._in_background(prepared.close)  # its mapping, and its file unless it was linked
        if replaced is not None:
            os.close(replaced[1])
        if previous is not None:
            _unlink(self._path(name, previous))
        if self.keep_prepared and not table.computed:  # the next publish of a table this size
            self._prepare_in_background(segment_size(table))
        return info

    def _build(self, name: str, table: TableSpec, prepared: PreparedSegment | None,
               progress) -> tuple[int, Path, int]:
        """(generation, path, fd holding its build lock) of a new READY segment of `table`
        under its generation name, not yet flipped: built in `prepared` (then linked), or
        created, filled and sealed in place. Leaves no file behind if it raises."""
        with self._registry.locked() as registry:
            if not registry.has_room(name):
                raise ShmError("name", f"cannot publish {name!r}: the registry is full; remove a table first")
            registry.allow_readers(self.mode)
            generation = registry.allocate_generation()
            path = self._path(name, generation)
            if prepared is None:
                # Created and flocked under the registry lock: reclaim never sees it unlocked.
                fd = segment.create(path, table, name, generation, self.mode, self._algorithm)
        if prepared is not None:
            # Built unnamed and flocked since it was prepared; linked only once READY.
            prepared.build(table, name, generation, self._algorithm, progress)
            return generation, path, prepared.link(path)
        try:
            segment.fill(fd, table, self._algorithm, progress)
        except BaseException:
            segment.discard(path, fd)
            raise
        return generation, path, fd

    def prepare(self, table: TableSpec) -> None:
        """Prepare a segment for the next publish of a table the size of `table` (any table
        whose segment file has that size: same rows x width x itemsize and spec length; use
        the table you will publish). Takes as long as a cold publish's allocation (~35-40 ms
        for 64 MiB on tmpfs) on the calling thread and holds that much memory until a
        publish uses it or the store closes. Replaces a prepared segment of another size;
        a no-op if one of this size is held. ShmError if the directory has no room."""
        if not isinstance(table, TableSpec):
            raise PosencError("table", f"must be a posenc.tables.TableSpec, got {type(table).__name__}")
        self._check_open()
        size = segment_size(table)
        with self._prepared_lock:
            if self._prepared is not None and self._prepared.file_size == size:
                return
        self._hold(PreparedSegment(self.root, size, self.mode))

    @property
    def prepared_bytes(self) -> int:
        """Size of the prepared segment this store holds (0: none)."""
        with self._prepared_lock:
            return self._prepared.file_size if self._prepared is not None else 0

    def _hold(self, fresh: PreparedSegment) -> None:
        """Keep `fresh` as the prepared segment (one per store: the one it replaces is freed)."""
        with self._prepared_lock:
            if self._accepting:
                fresh, self._prepared = self._prepared, fresh
        if fresh is not None:
            fresh.close()

    def _take_prepared(self, size: int) -> PreparedSegment | None:
        """The prepared segment, handed to the caller, if it has `size` bytes."""
        with self._prepared_lock:
            prepared = self._prepared
            if prepared is None or prepared.file_size != size:
                return None
            self._prepared = None
            return prepared

    def _in_background(self, job) -> None:
        """Run `job` on the store's background thread (inline once close() has begun)."""
        with self._prepared_lock:
            queued = self._submit(job)
        if queued is None:
            job()

    def _submit(self, job) -> Future | None:
        """Queue `job` on the background thread (caller holds _prepared_lock); None once closing."""
        if not self._accepting:
            return None
        if self._background is None:
            self._background = ThreadPoolExecutor(1, thread_name_prefix="posenc-store")
        return self._background.submit(job)

    def _prepare_in_background(self, size: int) -> None:
        """keep_prepared: prepare a segment of `size` bytes in the background, unless one of
        that size is held or a preparation is on its way (so at most one of each exists)."""
        with self._prepared_lock:
            if (self._preparing is not None and not self._preparing.done()) \
                    or (self._prepared is not None and self._prepared.file_size == size):
                return
            self._preparing = self._submit(lambda: self._prepare_quietly(size))

    def _prepare_quietly(self, size: int) -> None:
        try:
            self._hold(PreparedSegment(self.root, size, self.mode))
        except ShmError:
            pass  # no room for it now: the next publish is a cold one, and reports a lack of space itself

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
        died mid-build, or between READY and the registry flip), after letting go of those this
        store published that others replaced or removed (`release_superseded`). Returns how many
        it unlinked."""
        self._check_open()
        reclaimed = 0
        with self._registry.locked() as registry:
            current = registry.entries()
            self._release(self._superseded(current))
            for name, generation, path in segment_files(self.root):
                if current.get(name) == generation:
                    continue
                if _abandoned(path):
                    reclaimed += 1
        return reclaimed

    def release_superseded(self) -> int:
        """Let go of the tables this store published that another store (another worker, the CLI)
        has since replaced or removed: its build lock on such a segment keeps the unlinked file,
        and its memory, until this store next publishes that name. Takes the registry lock only
        when there is one (cheap enough to call every second). Returns how many it let go of."""
        self._check_open()
        if not self._superseded(self._registry.entries()):  # a seqlock read: no lock needed to look
            return 0
        with self._registry.locked() as registry:
            superseded = self._superseded(registry.entries())
            self._release(superseded)
        return len(superseded)

    def _superseded(self, current: dict[str, int]) -> list[str]:
        """The names whose generation this store holds that `current` (the registry) no longer names."""
        return [name for name, (generation, _) in list(self._owned.items())
                if current.get(name) != generation]

    def _release(self, names: list[str]) -> None:
        """Close our locks on `names`' generations (caller holds the registry lock)."""
        for name in names:
            os.close(self._owned.pop(name)[1])

    def close(self) -> None:
        """Unpublish and unlink every table this store still owns (clean shutdown), and free
        the prepared segment (after waiting for a background preparation). Idempotent."""
        if self._registry is None:
            return
        with self._prepared_lock:
            self._accepting = False
            background, self._background = self._background, None
        if background is not None:
            background.shutdown(wait=True)  # a preparation finishing now frees its segment itself
        if self._prepared is not None:
            self._prepared.close()
            self._prepared = None
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
