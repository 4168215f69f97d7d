"""Bounds on every request, so no call can exhaust memory or leave the exact range.

Defaults can be changed per process with environment variables (read once at import)
or by assigning to the fields of `LIMITS`. The position limit is one setting with one syntax
wherever it is given (`[limits] max_abs_position`, `posenc serve --max-abs-position`,
`posenc-server --max-abs-position`, POSENC_MAX_ABS_POSITION; docs/protocol.md, Limits):
`parse_max_abs_position` here and `parse_max_abs` in native/server/config.c read it by the same rules.
"""

from __future__ import annotations

import os
import re
from contextlib import contextmanager
from dataclasses import dataclass

from .errors import OutputTooLarge, PosencError


#: Integers are exact in float64 up to here, so no position limit may exceed it.
MAX_EXACT_POSITION = 1 << 53

#: What `max_abs_position` accepts, said the same way by every door that refuses a value.
MAX_ABS_POSITION_SYNTAX = (f"an integer from 1 to {MAX_EXACT_POSITION} (2^53), written as decimal digits "
                           "(1700000000000) or in exponent form (1e13, 9.007199254740992e15)")
#: Why no limit above 2^53 is accepted (the C server says the same).
ABOVE_EXACT = ("positions are int64 on the wire, but above 2^53 not every integer has a float64 value, "
               "so exactness could not be promised")

#: Digits, or digits with an optional fraction and an exponent; nothing else (no sign, spaces or underscores).
_SPELLING = re.compile(r"([0-9]+)(?:\.([0-9]+))?[eE]([+-]?[0-9]+)|([0-9]+)")
#: Longest accepted text: bounds the arithmetic (an exponent's size then decides nothing it cannot).
MAX_SPELLING_CHARS = 64
#: Digits of the largest accepted value: a longer digit string (leading zeros gone) is over 2^53.
_MOST_DIGITS = len(str(MAX_EXACT_POSITION))


def parse_max_abs_position(text: str) -> int:
    """The position limit a text spells; ValueError with the reason (without a setting's name, which
    the caller adds) if it spells none. Exact decimal arithmetic on the digits, never a float, so
    9007199254740993 and 9.007199254740993e15 are refused rather than rounded to 2^53."""
    shown = text if len(text) <= 40 else f"{text[:37]}..."
    refused = ValueError(f"must be {MAX_ABS_POSITION_SYNTAX}; got {shown!r}")
    match = _SPELLING.fullmatch(text) if len(text) <= MAX_SPELLING_CHARS else None
    if match is None:
        raise refused
    whole, fraction, exponent, digits = match.groups()
    if digits is not None:
        whole, fraction, exponent = digits, "", "0"
    fraction = fraction or ""
    mantissa = (whole + fraction).lstrip("0")
    shift = int(exponent) - len(fraction)  # the value is mantissa * 10^shift
    if not mantissa:
        raise refused  # zero, however spelled
    if shift < 0:
        if -shift > len(mantissa) or mantissa[shift:].strip("0"):
            raise refused  # a fraction
        mantissa, shift = mantissa[:shift], 0
    if len(mantissa) + shift > _MOST_DIGITS or int(mantissa) * 10**shift > MAX_EXACT_POSITION:
        raise ValueError(f"must be at most {MAX_EXACT_POSITION} (2^53), got {shown!r}: {ABOVE_EXACT}")
    return int(mantissa) * 10**shift


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise PosencError(name, f"must be an integer, got {raw!r}") from None
    if value < 1:
        raise PosencError(name, f"must be >= 1, got {value}")
    return value


def env_max_abs_position(environ, default: int | None) -> int | None:
    """POSENC_MAX_ABS_POSITION from `environ`, else `default` (unset or empty, as posenc-server reads
    it); a bad value is refused naming the variable."""
    raw = environ.get("POSENC_MAX_ABS_POSITION")
    if not raw:
        return default
    try:
        return parse_max_abs_position(raw)
    except ValueError as exc:
        raise PosencError("POSENC_MAX_ABS_POSITION", str(exc)) from None


@dataclass
class Limits:
    #: Largest array any call may return (bytes). POSENC_MAX_OUTPUT_BYTES.
    max_output_bytes: int = 1 << 30
    #: Largest |position|, at most 2^53 (the default), up to which every integer position is exact.
    #: POSENC_MAX_ABS_POSITION.
    max_abs_position: int = MAX_EXACT_POSITION
    #: Largest encoding width / head_dim / head count. POSENC_MAX_DIM.
    max_dim: int = 1 << 16

    @classmethod
    def from_env(cls) -> "Limits":
        return cls(
            max_output_bytes=_env_int("POSENC_MAX_OUTPUT_BYTES", cls.max_output_bytes),
            max_abs_position=env_max_abs_position(os.environ, cls.max_abs_position),
            max_dim=_env_int("POSENC_MAX_DIM", cls.max_dim),
        )

    @contextmanager
    def positions_up_to(self, max_abs_position: int):
        """Within the block, `max_abs_position` is the limit (a service config's [[tables]] are
        parsed under the limit the service will run with, not the parsing process's)."""
        saved, self.max_abs_position = self.max_abs_position, max_abs_position
        try:
            yield
        finally:
            self.max_abs_position = saved

    def check_output(self, shape: tuple[int, ...], itemsize: int, field: str = "positions") -> None:
        n = itemsize
        for s in shape:
            n *= int(s)
        if n > self.max_output_bytes:
            raise OutputTooLarge(
                field,
                f"output of shape {tuple(shape)} would be {n} bytes, over the limit of "
                f"{self.max_output_bytes} bytes (POSENC_MAX_OUTPUT_BYTES)",
            )


LIMITS = Limits.from_env()
