"""The registry: one small fixed-size file mapping table names to their current generation.

Layout (little-endian, docs/shm-format.md): a 128-byte header (magic "POSENCRG", version,
capacity, slot size, next generation) then `CAPACITY` slots of 128 bytes: a seqlock counter,
the generation (0 = free slot) and the NUL-padded name. Writers serialise with `flock` on
the registry file and bump a slot's counter to odd, write, then to even; readers retry
until they see the same even counter before and after copying the slot, so a reader
never sees half an update.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import struct
import threading
import time
from pathlib import Path

import numpy as np

from ..native import BINDING
from .errors import ShmError
from .layout import (BUSY, CAPACITY, HEADER_BYTES, HEADER_WORDS, MAGIC, NAME_WORDS, NOT_FOUND, SIZE,
                     SLOT_BYTES, SLOT_WORDS, VERSION)
from .locks import LOCK_TIMEOUT_S, describe_holders
from .paths import MAX_GENERATION, NAME_MAX, REGISTRY_FILE, segment_file, segment_files
from .segment import close_mapping

_HEADER = struct.Struct("<8sIIIIQ")  # magic, version, capacity, slot size, reserved, next generation
_NEXT_GENERATION_WORD = 3
_BUSY_TIMEOUT_S = 2.0

# The seqlock accesses of a slot: the native binding's (posenc_shm.h's slot reader), else numba's.
if BINDING is not None:
    _find, _snapshot = BINDING.registry_find, BINDING.registry_snapshot
    _write_slot = BINDING.registry_write_slot
else:
    from .seqlock import find as _find, snapshot as _snapshot, write_slot as _write_slot


def _name_words(name: str) -> np.ndarray:
    return np.frombuffer(name.encode().ljust(NAME_MAX, b"\0"), dtype=np.uint64)


def _entries(words: np.ndarray) -> dict[str, int]:
    """{name: generation} of every live slot, retrying while a writer is mid-update."""
    out = np.empty((CAPACITY, 1 + NAME_WORDS), np.uint64)
    deadline = time.monotonic() + _BUSY_TIMEOUT_S
    while not _snapshot(words, out):
        if time.monotonic() > deadline:
            raise ShmError("registry", "a slot stayed busy (a writer is stuck mid-update)")
        time.sleep(0.001)
    entries: dict[str, int] = {}
    for slot in np.flatnonzero(out[:, 0]):
        name = out[slot, 1:].tobytes().rstrip(b"\0").decode("ascii", "replace")
        if name not in entries and int(out[slot, 0]) <= MAX_GENERATION:  # the first slot naming it wins
            entries[name] = int(out[slot, 0])
    return entries


def _lookup(words: np.ndarray, name: str) -> tuple[int, int]:
    """(slot, generation) of the first slot naming `name` (slot NOT_FOUND if none)."""
    name_words = _name_words(name)
    deadline = time.monotonic() + _BUSY_TIMEOUT_S
    while True:
        slot, generation = _find(words, name_words)
        if slot != BUSY:
            return int(slot), int(generation)
        if time.monotonic() > deadline:
            raise ShmError("registry", f"the slot of {name!r} stayed busy (a writer is stuck mid-update)")
        time.sleep(0.001)


def _check_header(buffer, path: Path) -> None:
    magic, version, capacity, slot_bytes, _, _ = _HEADER.unpack_from(buffer)
    if magic != MAGIC:
        raise ShmError("registry", f"{path}: bad magic {magic!r} (expected {MAGIC!r}): corrupted registry; "
                       "delete it (every table must then be published again)")
    if (version, capacity, slot_bytes) != (VERSION, CAPACITY, SLOT_BYTES):
        raise ShmError("registry", f"{path}: unknown registry layout (version {version}, {capacity} slots of "
                       f"{slot_bytes} bytes; this reader knows version {VERSION}, {CAPACITY}x{SLOT_BYTES})")


class _Registry:
    """Seqlock reads of a mapped registry, shared by readers and writers."""

    _words: np.ndarray

    def generation(self, name: str) -> int | None:
        """The current generation of `name`, None if there is no such table."""
        slot, generation = _lookup(self._words, name)
        if slot != NOT_FOUND and generation > MAX_GENERATION:
            raise ShmError("registry", f"{self.path}: corrupted slot: {name!r} has generation {generation}")
        return None if slot == NOT_FOUND else generation

    def entries(self) -> dict[str, int]:
        """{name: current generation} of every table."""
        return _entries(self._words)


class RegistryView(_Registry):
    """Read-only mapping of the registry (readers): never locks, never writes."""

    def __init__(self, path: Path, mapping: mmap.mmap):
        self.path = path
        self._mapping = mapping
        self._words = np.frombuffer(mapping, dtype=np.uint64)

    @classmethod
    def open(cls, root: Path) -> RegistryView | None:
        """The registry of `root`, or None when no store has initialised one there yet: no file,
        or one whose magic is still zero (a store is creating it; it stores the magic last)."""
        path = root / REGISTRY_FILE
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ShmError("registry", f"{path}: cannot open: {exc.strerror}") from None
        try:
            size = os.fstat(fd).st_size
            if size < SIZE:
                if any(os.pread(fd, 8, 0)):
                    raise ShmError("registry", f"{path}: truncated registry ({size} bytes, expected {SIZE})")
                return None  # a store is initialising it
            mapping = mmap.mmap(fd, SIZE, mmap.MAP_SHARED, mmap.PROT_READ)
        finally:
            os.close(fd)
        if mapping[:8] == bytes(8):
            mapping.close()
            return None  # sized but the magic is not stored yet
        try:
            _check_header(mapping, path)
        except ShmError:
            mapping.close()
            raise
        return cls(path, mapping)

    def close(self) -> None:
        self._words = None
        close_mapping(self._mapping)


class RegistryWriter(_Registry):
    """The writer's read-write mapping: creates the registry on first use; updates under flock."""

    def __init__(self, root: Path, mode: int, lock_timeout_s: float = LOCK_TIMEOUT_S):
        self.root = root
        self.path = root / REGISTRY_FILE
        self.lock_timeout_s = lock_timeout_s
        self._thread_lock = threading.Lock()
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, mode)
        except OSError as exc:
            raise ShmError("registry", f"cannot open {self.path}: {exc.strerror}") from None
        try:
            with self._flock():
                magic = os.pread(self._fd, 8, 0)
                if magic.strip(b"\0") == b"":
                    self._initialise(mode)  # new, or left behind by a creator that died
                if os.fstat(self._fd).st_size < SIZE:
                    raise ShmError("registry", f"{self.path}: truncated registry (expected {SIZE} bytes)")
            _check_header(os.pread(self._fd, _HEADER.size, 0), self.path)
            self._mapping = mmap.mmap(self._fd, SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(self._fd)
            raise
        self._words = np.frombuffer(self._mapping, dtype=np.uint64)

    def _initialise(self, mode: int) -> None:
        """Zeroed slots, the header, and the magic last (readers ignore a file without it).

        Runs under the lock whenever the magic is zero, whatever the file's size: a creator that
        died before storing the magic, or a full-size registry whose magic was zeroed. Its slots
        are zeroed too: readers saw no table in a registry without a magic, so none comes back
        (the tables it named must be published again; reclaim deletes their files)."""
        os.fchmod(self._fd, mode)
        try:
            os.posix_fallocate(self._fd, 0, SIZE)  # grows and zero-fills; never shrinks a mapped file
        except OSError as exc:
            raise ShmError("registry", f"cannot create {self.path} ({SIZE} bytes): {exc.strerror}") from None
        os.pwrite(self._fd, bytes(SIZE - HEADER_BYTES), HEADER_BYTES)
        # Generations never repeat, even across a registry that was deleted and created again.
        first, _ = self._first_unused_generation({})
        os.pwrite(self._fd, _HEADER.pack(bytes(8), VERSION, CAPACITY, SLOT_BYTES, 0,
                                         first if first <= MAX_GENERATION else 0), 0)
        os.pwrite(self._fd, MAGIC, 0)

    def _first_unused_generation(self, current: dict[str, int]) -> tuple[int, str]:
        """(1 + the highest generation in use, what uses it): segment files on disk and the
        registry's current generations."""
        in_use = [(generation, segment_file(name, generation)) for name, generation, _ in segment_files(self.root)]
        in_use += [(generation, f"the registry slot of {name!r}") for name, generation in current.items()]
        highest, holder = max(in_use, default=(0, ""))
        return highest + 1, holder

    @contextlib.contextmanager
    def _flock(self):
        """flock(LOCK_EX) on the registry, waiting at most lock_timeout_s: whoever can read the
        file can also lock it, so a stuck or hostile holder must not block writers forever."""
        deadline = time.monotonic() + self.lock_timeout_s
        delay = 0.0005
        while True:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise ShmError("registry", f"{self.path}: still locked after {self.lock_timeout_s:g} s by "
                                   f"{describe_holders(self._fd)}: a writer is stuck, or another process "
                                   "(readers never lock) holds flock on it; nothing was changed") from None
                time.sleep(delay)
                delay = min(2 * delay, 0.02)
        try:
            yield
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def locked(self):
        """Exclusive writer section, across threads (flock alone does not exclude threads sharing
        one fd) and processes, entered within lock_timeout_s. Slots left odd by a writer that
        died mid-update (content unknown) and slots repeating the name of an earlier slot are
        cleared first: readers use the first slot of a name and would never see them."""
        if not self._thread_lock.acquire(timeout=self.lock_timeout_s):
            raise ShmError("registry", f"{self.path}: another thread of this process held the writer lock for "
                           f"{self.lock_timeout_s:g} s; nothing was changed")
        try:
            with self._flock():
                self._clear_unusable_slots()
                yield self
        finally:
            self._thread_lock.release()

    def _clear_unusable_slots(self) -> None:
        for slot in np.flatnonzero(self._words[HEADER_WORDS::SLOT_WORDS] & 1):
            self._clear_slot(int(slot))
        seen = set()
        for slot in np.flatnonzero(self._words[HEADER_WORDS + 1::SLOT_WORDS]):
            base = HEADER_WORDS + int(slot) * SLOT_WORDS
            name = self._words[base + 2:base + 2 + NAME_WORDS].tobytes()
            if name in seen:
                self._clear_slot(int(slot))
            seen.add(name)

    def _clear_slot(self, slot: int) -> None:
        _write_slot(self._words, slot, 0, np.zeros(NAME_WORDS, np.uint64))

    def allow_readers(self, mode: int) -> None:
        """Add the read bits of `mode` (a table's) to the registry's mode, so whoever may read the
        table may also find it. Bits are only ever added, and never write or execute bits."""
        current = os.fstat(self._fd).st_mode & 0o777
        wanted = current | (mode & 0o444)
        if wanted == current:
            return
        try:
            os.fchmod(self._fd, wanted)
        except OSError as exc:
            raise ShmError("mode", f"mode {mode:04o} lets others read the table but not find it: {self.path} is "
                           f"mode {current:04o} and cannot be changed to {wanted:04o} by this process "
                           f"({exc.strerror}); publish with a narrower mode or have the registry's owner chmod it"
                           ) from None

    def allocate_generation(self) -> int:
        """The next generation: the larger of `next_generation` (when it is within
        1..MAX_GENERATION) and 1 + the highest generation in use (segment files on disk and the
        registry's slots). Checking what is in use on every allocation is what keeps generations
        from being reused when the counter was set back inside the valid range (damage, a
        restored copy): it then continues above the directory's highest generation, not at 1.
        A counter outside the range is recomputed the same way, so it recovers as soon as the
        offending file is gone; exhaustion is a clear error, never an overflow."""
        counter = int(self._words[_NEXT_GENERATION_WORD])
        first_unused, holder = self._first_unused_generation(self.entries())
        generation = max(counter if 1 <= counter <= MAX_GENERATION else 0, first_unused)
        if generation > MAX_GENERATION:
            raise ShmError("registry", f"generation numbers are exhausted in {self.root}: {holder} has the "
                           f"highest one ({MAX_GENERATION}); remove it")
        self._words[_NEXT_GENERATION_WORD] = generation + 1  # at most 2**63: fits the u64 counter
        return generation

    def has_room(self, name: str) -> bool:
        return _lookup(self._words, name)[0] != NOT_FOUND or self._free_slot() is not None

    def _free_slot(self) -> int | None:
        generations = self._words[HEADER_WORDS + 1::SLOT_WORDS]
        free = np.flatnonzero(generations == 0)
        return int(free[0]) if free.size else None

    def set(self, name: str, generation: int) -> int | None:
        """Point `name` at `generation`; returns the generation it replaced (None if new)."""
        slot, previous = _lookup(self._words, name)
        if slot == NOT_FOUND:
            slot, previous = self._free_slot(), None
            if slot is None:
                raise ShmError("name", f"the registry is full ({CAPACITY} tables); remove one first")
        _write_slot(self._words, slot, generation, _name_words(name))
        return previous

    def clear(self, name: str) -> int | None:
        """Remove `name`; returns the generation it had (None if there was no such table)."""
        slot, previous = _lookup(self._words, name)
        if slot == NOT_FOUND:
            return None
        self._clear_slot(slot)
        return previous

    def close(self) -> None:
        if self._fd < 0:
            return
        self._words = None
        self._mapping.close()
        os.close(self._fd)
        self._fd = -1
