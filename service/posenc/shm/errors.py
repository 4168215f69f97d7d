"""The error every shared-memory refusal raises."""

from __future__ import annotations

from ..errors import PosencError


class ShmError(PosencError):
    """A segment, registry or table name was refused. `field` is "name", "segment",
    "registry" or "table"; the message names the file and the problem (bad magic,
    unknown version, not READY, truncated, checksum mismatch, ...)."""
