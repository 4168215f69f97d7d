"""Canonical JSON and a stable hash for specs: the identity of a table in shared memory,
in caches and on the wire. Same parameters -> byte-identical JSON -> same hash."""

from __future__ import annotations

import hashlib
import inspect
import json

from ..errors import PosencError


def canonical_json(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def spec_hash(obj) -> str:
    """First 16 hex digits of SHA-256 of the canonical JSON."""
    return _digest(canonical_json(obj))


def _required_keywords(cls) -> list[str]:
    """Keyword-only arguments of cls.__init__ without a default (LearnedSpec's dim)."""
    return [p.name for p in inspect.signature(cls.__init__).parameters.values()
            if p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is inspect.Parameter.empty]


class Canonical:
    """Mixin for specs: identity (canonical JSON, hash) derived from `to_dict()`, computed once,
    and `from_dict` for specs built as cls(POSITIONAL, **KEYWORDS)."""

    KIND: str  # the "kind" of to_dict()
    POSITIONAL: str  # the one positional argument of __init__
    KEYWORDS: tuple[str, ...]  # its keyword arguments

    def to_dict(self) -> dict:
        raise NotImplementedError

    @classmethod
    def from_dict(cls, d: dict):
        """The spec a dict describes (to_dict() output, or a user's JSON); missing or unknown keys name themselves."""
        d = {k: v for k, v in d.items() if k != "kind"}
        if cls.POSITIONAL not in d:
            raise PosencError(cls.POSITIONAL, "is required")
        known = {cls.POSITIONAL, *cls.KEYWORDS}
        for key in d:
            if key not in known:
                raise PosencError(key, f"is not a {cls.KIND} spec field; known: {sorted(known)}")
        for key in _required_keywords(cls):
            if key not in d:
                raise PosencError(key, "is required")
        return cls(d.pop(cls.POSITIONAL), **d)

    @classmethod
    def coerce(cls, spec, field: str = "spec"):
        """`spec` as this class: an instance as it is, a dict through from_dict."""
        if isinstance(spec, cls):
            return spec
        if isinstance(spec, dict):
            return cls.from_dict(spec)
        raise PosencError(field, f"must be a {cls.__name__} or a dict, got {type(spec).__name__}")

    @property
    def canonical_json(self) -> str:
        cached = self.__dict__.get("_canonical_json")
        if cached is None:  # frozen dataclasses: write the cache straight into __dict__
            cached = self.__dict__["_canonical_json"] = canonical_json(self.to_dict())
        return cached

    @property
    def hash(self) -> str:
        """First 16 hex digits of SHA-256 of the canonical JSON."""
        return _digest(self.canonical_json)
