"""The worker's caches (validated specs, prepared plans, row-route preparations, table
candidates), bounded in bytes and charged to its MemoryBudget.

A cache bounded by its number of entries is not bounded in memory: one RoPE spec with
head_dim 65536 holds a quarter MiB of frequencies, so a thousand distinct wide specs grew a
worker by hundreds of MiB outside `max_buffered_bytes`. Here every entry is weighed
(`footprint`: the objects it holds and the arrays it owns, what another cache or a
shared-memory mapping holds counting nothing) when it is stored; a cache keeps at most its
`cap` bytes (least recently used out first) and holds them from the worker's budget, so a
request needing those bytes finds them taken and the worst case stays idle + budget. An
entry the budget cannot hold is simply not kept: the next request builds it again.
"""

from __future__ import annotations

import sys
import types
from collections import OrderedDict
from collections.abc import Callable, Hashable

import numpy as np

from ..pipeline.budget import MemoryBudget

#: What a walk of an entry does not follow: shared by the whole process, owned by nobody's cache.
_SHARED = (type, types.ModuleType, types.BuiltinFunctionType, types.MethodWrapperType, types.CodeType)
_MAX_DEPTH = 12


def footprint(obj, seen: set | None = None, depth: int = 0) -> int:
    """Bytes `obj` keeps alive: its objects (sys.getsizeof), the data of arrays it owns (a view
    of a mapping or of another array counts its header only), followed through containers,
    instance attributes and closures, each object once."""
    seen = set() if seen is None else seen
    if id(obj) in seen or depth > _MAX_DEPTH or isinstance(obj, _SHARED):
        return 0
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        return sys.getsizeof(obj) if obj.base is not None else max(sys.getsizeof(obj), obj.nbytes)
    if isinstance(obj, (str, bytes, bytearray, int, float, bool, memoryview)) or obj is None:
        return sys.getsizeof(obj)
    size = sys.getsizeof(obj)
    depth += 1
    if isinstance(obj, dict):
        return size + sum(footprint(k, seen, depth) + footprint(v, seen, depth) for k, v in obj.items())
    if isinstance(obj, (list, tuple, set, frozenset)):
        return size + sum(footprint(item, seen, depth) for item in obj)
    if isinstance(obj, types.FunctionType):
        return size + sum(footprint(cell.cell_contents, seen, depth) for cell in obj.__closure__ or ()
                          if cell.cell_contents is not obj)
    if isinstance(obj, types.MethodType):
        return size + footprint(obj.__self__, seen, depth)
    if type(obj).__module__.startswith("numba"):
        return size  # a compiled kernel: the process's, shared by every caller
    attrs = getattr(obj, "__dict__", None)
    if attrs is not None:
        size += footprint(attrs, seen, depth)
    for cls in type(obj).__mro__:
        for name in getattr(cls, "__slots__", ()):
            size += footprint(getattr(obj, name, None), seen, depth)
    return size


class ByteCache:
    """A least-recently-used map of at most `cap` bytes of entries (key and value weighed by
    `footprint`), those bytes held from `budget` while kept."""

    def __init__(self, budget: MemoryBudget, cap: int):
        self.budget = budget
        self.cap = cap
        self.held = 0
        self._entries: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable):
        """The value kept under `key` (now the most recently used), or None."""
        entries = self._entries
        found = entries.get(key)
        if found is None:
            return None
        entries.move_to_end(key)
        return found[0]

    def put(self, key: Hashable, value, weigh=None) -> None:
        """Keep `value` under `key` if it fits the cap and the budget (after letting go of the least
        recently used entries); otherwise keep nothing. `weigh`, when given, stands for `value` on
        the scale: what the entry alone keeps alive (a value that refers to objects another cache
        owns is weighed by its names of them)."""
        self.pop(key)
        size = footprint(key) + footprint(value if weigh is None else weigh)
        if size > self.cap:
            return
        while self._entries and self.held + size > self.cap:
            self._evict()
        while not self.budget.hold_cached(size):
            if not self._entries:
                return
            self._evict()
        self._entries[key] = (value, size)
        self.held += size

    def cached(self, build: Callable, key: Hashable, *args):
        """build(*args), kept under `key`: built again only once it has left the cache. A build that
        raises keeps nothing, so a bad input is refused with the same error every time."""
        value = self.get(key)
        if value is None:
            value = build(*args)
            self.put(key, value)
        return value

    def pop(self, key: Hashable) -> None:
        found = self._entries.pop(key, None)
        if found is not None:
            self._release(found[1])

    def drop(self, matches: Callable[[Hashable], bool]) -> None:
        """Let go of every entry whose key `matches`."""
        for key in [key for key in self._entries if matches(key)]:
            self.pop(key)

    def clear(self) -> None:
        self.budget.release_cached(self.held)
        self.held = 0
        self._entries.clear()

    def _evict(self) -> None:
        _, (_, size) = self._entries.popitem(last=False)
        self._release(size)

    def _release(self, size: int) -> None:
        self.held -= size
        self.budget.release_cached(size)
