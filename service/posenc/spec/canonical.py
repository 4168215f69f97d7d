"""Canonical JSON and a stable hash for specs: the identity of a table in shared memory,
in caches and on the wire. Same parameters -> byte-identical JSON -> same hash."""

from __future__ import annotations

import hashlib
import json


def canonical_json(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


def spec_hash(obj) -> str:
    """First 16 hex digits of SHA-256 of the canonical JSON."""
    return hashlib.sha256(canonical_json(obj).encode()).hexdigest()[:16]
