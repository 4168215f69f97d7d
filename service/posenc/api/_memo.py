"""A least-recently-used memo bounded in bytes, for the library's caches of derived arrays.

functools.lru_cache bounds the number of entries, not their size: the inverse frequencies of a
RoPE spec with head_dim 65536 are a quarter MiB, so a thousand distinct wide specs (a service's
clients can send them) held hundreds of MiB. `bytes_lru(max_bytes)` keeps what its function
returned (arrays, tuples or objects holding arrays) while their total `nbytes` stays under `max_bytes`,
letting go of the least recently used first; a value larger than that is returned, not kept.
Safe to call from several threads (the service computes large jobs in worker threads).
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict

import numpy as np


def _nbytes(value, depth: int = 0) -> int:
    """The bytes of the arrays `value` holds: itself, its items, its attributes (two levels deep)."""
    if isinstance(value, np.ndarray):
        return value.nbytes
    if depth > 2:
        return 0
    if isinstance(value, tuple):
        return sum(_nbytes(item, depth + 1) for item in value)
    slots = getattr(type(value), "__slots__", ())
    attrs = [getattr(value, name, None) for name in slots] + list(getattr(value, "__dict__", {}).values())
    return sum(_nbytes(item, depth + 1) for item in attrs)


def bytes_lru(max_bytes: int):
    def wrap(function):
        entries: OrderedDict = OrderedDict()
        lock = threading.Lock()
        held = 0

        @functools.wraps(function)
        def memo(*args):
            nonlocal held
            with lock:
                found = entries.get(args)
                if found is not None:
                    entries.move_to_end(args)
                    return found[0]
            value = function(*args)
            size = _nbytes(value)
            if size <= max_bytes:
                with lock:
                    if args not in entries:
                        while entries and held + size > max_bytes:
                            held -= entries.popitem(last=False)[1][1]
                        entries[args] = (value, size)
                        held += size
            return value

        return memo

    return wrap
