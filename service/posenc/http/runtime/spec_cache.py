"""Validated specs by the JSON that described them: a request's spec is checked once, not every time.

Building a spec from a request's dict (checking every field, deriving its frequencies and
canonical JSON) costs more than computing a few rows with it, and clients send the same few
specs again and again. `SpecCache(build, *args)` returns what `build(*args)` returned for
the same JSON arguments before; a build that raises is not remembered, so a bad spec is
refused with the same error every time. The key is the exact JSON of the arguments (1 and
1.0, "" and a missing field stay apart) and the library limits specs are checked against,
so changing LIMITS never serves a spec built under other limits. Bounded in bytes and
charged to the worker's budget (caches.ByteCache); one per worker (Service.specs).
"""

from __future__ import annotations

import orjson

from ...limits import LIMITS
from .caches import ByteCache

#: The longest JSON a spec is keyed by (larger ones are rebuilt each time).
MAX_KEY_BYTES = 64 << 10


class SpecCache:
    def __init__(self, cache: ByteCache):
        self.cache = cache

    def __call__(self, build, *args):
        """build(*args) for JSON-like args (dicts, strings, numbers, None), from the cache when seen before."""
        try:
            text = orjson.dumps(args)
        except TypeError:  # not JSON (a non-string key, an int beyond 64 bits): no stable key
            return build(*args)
        if len(text) > MAX_KEY_BYTES:
            return build(*args)
        return self.cache.cached(build, (build, text, LIMITS.max_dim, LIMITS.max_abs_position), *args)
