"""`TableSpec`: a precomputable table = an encoding spec + a contiguous position range + a dtype.

This is the unit the shared-memory store publishes, the HTTP service serves by name and
the binary server looks rows up in. Rows are `positions start..stop-1`:
  * sinusoidal: the encoding row, width = dim
  * rope:       [cos(p w_0..w_{n-1}) | sin(p w_0..w_{n-1})], width = 2*n_freq,
                attention factor applied, frequencies at `seq_len` (None = init values)
  * alibi:      slopes * p (BLOOM's m_h * key position), width = n_heads
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .args import as_float, as_int
from .dtypes import OUTPUT_DTYPES, kernel_dtype, output_dtype
from .errors import PosencError
from .limits import LIMITS
from .encodings import AlibiSpec, RopeSpec, SinusoidalSpec
from .encodings.canonical import Canonical

ENCODINGS = {spec.KIND: spec for spec in (SinusoidalSpec, RopeSpec, AlibiSpec)}


@dataclass(frozen=True)
class TableSpec(Canonical):
    encoding: SinusoidalSpec | RopeSpec | AlibiSpec
    start: int
    stop: int
    dtype: str = "float32"
    seq_len: float | None = None  # rope only: fixes dynamic/longrope frequencies

    def __post_init__(self):
        if not isinstance(self.encoding, tuple(ENCODINGS.values())):
            raise PosencError("encoding", f"must be one of {sorted(ENCODINGS)}")
        limit = LIMITS.max_abs_position
        start = as_int(self.start, "start", minimum=-limit, maximum=limit)
        stop = as_int(self.stop, "stop", minimum=start + 1, maximum=limit + 1)
        object.__setattr__(self, "start", start)
        object.__setattr__(self, "stop", stop)
        dtype = output_dtype(self.dtype)
        if kernel_dtype(dtype) != dtype:
            raise PosencError("dtype", "tables are stored as float32 or float64 (cast on the way out)")
        object.__setattr__(self, "dtype", dtype.name)
        if self.seq_len is not None:
            if not isinstance(self.encoding, RopeSpec):
                raise PosencError("seq_len", "only applies to rope tables")
            object.__setattr__(self, "seq_len", as_float(self.seq_len, "seq_len", exclusive_minimum=0.0))
        LIMITS.check_output(self.shape, OUTPUT_DTYPES[self.dtype].itemsize, field="stop")

    @property
    def kind(self) -> str:
        return self.encoding.KIND

    @property
    def rows(self) -> int:
        return self.stop - self.start

    @property
    def width(self) -> int:
        if self.kind == "alibi":
            return self.encoding.n_heads
        return self.encoding.dim if self.kind == "sinusoidal" else 2 * self.encoding.n_freq

    @property
    def shape(self) -> tuple[int, int]:
        return (self.rows, self.width)

    @property
    def np_dtype(self) -> np.dtype:
        return OUTPUT_DTYPES[self.dtype]

    @property
    def nbytes(self) -> int:
        return self.rows * self.width * self.np_dtype.itemsize

    def fill(self, out: np.ndarray, lo: int = 0, hi: int | None = None) -> None:
        """Compute rows lo..hi (relative to start) into out[lo:hi] (C-contiguous, self.dtype)."""
        from .api.rope import rope_table
        from .api.sinusoidal import sinusoidal_table

        hi = self.rows if hi is None else hi
        positions = np.arange(self.start + lo, self.start + hi, dtype=np.float64)
        block = out[lo:hi]
        if self.kind == "sinusoidal":
            sinusoidal_table(positions, self.encoding, self.np_dtype, out=block)
        elif self.kind == "alibi":
            np.multiply(positions[:, None], self.encoding.slopes[None, :], out=block, casting="same_kind")
        else:
            rope_table(positions, self.encoding, seq_len=self.seq_len, dtype=self.dtype, out=block)

    def to_dict(self) -> dict:
        return {"encoding": self.encoding.to_dict(), "start": self.start, "stop": self.stop, "dtype": self.dtype,
                "seq_len": self.seq_len}

    @classmethod
    def from_dict(cls, d: dict) -> "TableSpec":
        if not isinstance(d, dict):
            raise PosencError("table", "must be an object")
        enc = d.get("encoding")
        if not isinstance(enc, dict) or not isinstance(enc.get("kind"), str) or enc["kind"] not in ENCODINGS:
            raise PosencError("encoding.kind", f"must be one of {sorted(ENCODINGS)}")
        unknown = set(d) - {"encoding", "start", "stop", "dtype", "seq_len"}
        if unknown:
            raise PosencError(sorted(unknown)[0], "is not a table field")
        try:
            encoding = ENCODINGS[enc["kind"]].from_dict(enc)
        except PosencError as exc:
            raise PosencError(f"encoding.{exc.field}", exc.message) from None
        return cls(encoding, d.get("start", 0), d.get("stop"), d.get("dtype", "float32"), d.get("seq_len"))

