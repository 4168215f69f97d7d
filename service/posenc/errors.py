"""The one error type bad parameters raise.

It subclasses ValueError (the public contract) and carries the name of the offending
parameter in `field`, so every front end (HTTP, binary protocol, CLI) can report it
without parsing messages.
"""

from __future__ import annotations


class PosencError(ValueError):
    """A parameter was rejected. `field` names it; the message always starts with it."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


class OutputTooLarge(PosencError):
    """The requested output would exceed `posenc.limits.LIMITS.max_output_bytes`."""
