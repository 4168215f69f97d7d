"""Validated specs by the JSON that described them: a request's spec is checked once, not every time.

Building a spec from a request's dict (checking every field, deriving its frequencies and
canonical JSON) costs more than computing a few rows with it, and clients send the same few
specs again and again. `cached(build, *args)` returns what `build(*args)` returned for the
same JSON arguments before; a build that raises is not remembered, so a bad spec is refused
with the same error every time. The key includes the library limits specs are checked
against, so changing LIMITS never serves a spec built under other limits. Bounded (LRU).
"""

from __future__ import annotations

from collections import OrderedDict

import orjson

from ..limits import LIMITS

#: How many specs one worker remembers, and the longest JSON it keys one by (larger ones are rebuilt).
MAX_SPECS = 1024
MAX_KEY_BYTES = 64 << 10

_specs: OrderedDict = OrderedDict()


def cached(build, *args):
    """build(*args) for JSON-like args (dicts, strings, numbers, None), from the cache when seen before."""
    try:
        key = (build, orjson.dumps(args), LIMITS.max_dim, LIMITS.max_abs_position)
    except TypeError:  # not JSON (a non-string key, an int beyond 64 bits): no stable key
        return build(*args)
    spec = _specs.get(key)
    if spec is not None:
        _specs.move_to_end(key)
        return spec
    spec = build(*args)
    if len(key[1]) <= MAX_KEY_BYTES:
        _specs[key] = spec
        if len(_specs) > MAX_SPECS:
            _specs.popitem(last=False)
    return spec
