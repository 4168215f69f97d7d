"""Bounds on every request, so no call can exhaust memory or leave the accurate range.

Defaults can be changed per process with environment variables (read once at import)
or by assigning to the fields of `LIMITS`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .errors import OutputTooLarge, PosencError


#: Integers are exact in float64 up to here, so no position limit may exceed it.
MAX_EXACT_POSITION = 1 << 53


def _env_int(name: str, default: int, maximum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise PosencError(name, f"must be an integer, got {raw!r}") from None
    if value < 1:
        raise PosencError(name, f"must be >= 1, got {value}")
    if maximum is not None and value > maximum:
        raise PosencError(name, f"must be <= {maximum}, got {value}")
    return value


@dataclass
class Limits:
    #: Largest array any call may return (bytes). POSENC_MAX_OUTPUT_BYTES.
    max_output_bytes: int = 1 << 30
    #: Largest |position|. Angles stay within 2 ulp (float32) of exact up to 2**24;
    #: beyond it the float64 angle p*w carries |p|*2**-53 rad of rounding. POSENC_MAX_ABS_POSITION.
    max_abs_position: int = 1 << 31
    #: Largest encoding width / head_dim / head count. POSENC_MAX_DIM.
    max_dim: int = 1 << 16

    @classmethod
    def from_env(cls) -> "Limits":
        return cls(
            max_output_bytes=_env_int("POSENC_MAX_OUTPUT_BYTES", cls.max_output_bytes),
            max_abs_position=_env_int("POSENC_MAX_ABS_POSITION", cls.max_abs_position, MAX_EXACT_POSITION),
            max_dim=_env_int("POSENC_MAX_DIM", cls.max_dim),
        )

    def position_refusal(self, biggest: float) -> str:
        """Why |position| `biggest` is refused and how to raise the limit, with the accuracy a
        raised limit gives: millisecond timestamps (~1.7e12) are a legitimate reason to."""
        return (f"|position| must be <= {self.max_abs_position}, got {biggest:g}. The limit is raised with the "
                f"environment variable POSENC_MAX_ABS_POSITION=N (read at import) or "
                f"posenc.LIMITS.max_abs_position = N, up to 2**53 = {MAX_EXACT_POSITION} (integers stay exact in "
                f"float64); beyond 2**24 a float64 angle p*w carries about |p|*2**-53 rad of rounding "
                f"({biggest * 2.0 ** -53:.1g} rad at {biggest:g})")

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
