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


class PositionBeyondLimit(PosencError):
    """A position beyond `posenc.LIMITS.max_abs_position`. The message tells a library user how to
    raise the limit; a service answers its caller with `caller_message`, which names the limit only:
    the caller cannot change a server's settings, and should not be told about its environment."""

    def __init__(self, field: str, index: int, value: int | float, limit: int, what: str = "is"):
        self.index, self.value, self.limit = index, value, limit
        shown = str(int(value)) if float(value).is_integer() else repr(float(value))  # an int shown exactly
        #: e.g. "element 3 is 18000000000000000" or "element 3 plus offset 5 is ..."
        self.element = f"element {index} {what} {shown}"
        most = 1 << 53  # posenc.limits.MAX_EXACT_POSITION (limits imports this module)
        if limit < most:
            advice = (f"raise it (up to 2^53 = {most}) with posenc.LIMITS.max_abs_position = N, or "
                      f"POSENC_MAX_ABS_POSITION=N before posenc is imported")
        else:
            advice = "2^53 is the most: above it not every integer has a float64 value"
        super().__init__(field, f"{self.element}, beyond the limit |p| <= {limit}; {advice}")

    @property
    def caller_message(self) -> str:
        return (f"{self.field}: {self.element}, beyond this service's limit |p| <= {self.limit} "
                "(max_abs_position)")
