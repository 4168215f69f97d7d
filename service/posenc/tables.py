"""`TableSpec`: a precomputable table = an encoding spec + a contiguous position range + a dtype.

This is the unit the shared-memory store publishes, the HTTP service serves by name and
the binary server looks rows up in. Rows are `positions start..stop-1`:
  * sinusoidal: the encoding row, width = dim
  * rope:       [cos(p w_0..w_{n-1}) | sin(p w_0..w_{n-1})], width = 2*n_freq,
                attention factor applied, frequencies at `seq_len` (None = init values)
  * alibi:      slopes * p (BLOOM's m_h * key position), width = n_heads
  * learned:    row p + offset of a checkpoint's position-embedding tensor, width = dim; the
                values are given (`source`, see `posenc.checkpoint`), not computed, and are
                only needed to publish: a segment holds them, its spec pins them by sha256

`computed=True` makes a *named computed encoding*: the same rows, but none stored. Its segment
holds the spec in the binary protocol's inline form (`posenc.shm.format`), and every reader
computes the rows it is asked for, for any position in [start, stop) -- by default every
position the limit admits, so a payments service can ask for the row of any transaction id.
Sinusoidal and RoPE only (the binary server evaluates sin and cos, nothing else).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .args import as_float, as_int
from .dtypes import OUTPUT_DTYPES, cast_output, kernel_dtype, midpoint_rows, output_dtype
from .encodings import AlibiSpec, LearnedSpec, RopeSpec, SinusoidalSpec
from .encodings.canonical import Canonical
from .errors import PosencError
from .kernels.rounding import ambiguous
from .limits import LIMITS

ENCODINGS = {spec.KIND: spec for spec in (SinusoidalSpec, RopeSpec, AlibiSpec, LearnedSpec)}
#: The kinds a named computed encoding may have: rows of sines and cosines.
COMPUTED_KINDS = ("sinusoidal", "rope")


@dataclass(frozen=True)
class TableSpec(Canonical):
    encoding: SinusoidalSpec | RopeSpec | AlibiSpec | LearnedSpec
    start: int
    stop: int
    dtype: str = "float32"
    seq_len: float | None = None  # rope only: fixes dynamic/longrope frequencies
    #: learned only: the checkpoint tensor [offset + num_positions, dim] the rows are copied from
    #: (not part of the identity: the encoding's sha256 is). None in a table read back from shm.
    source: np.ndarray | None = field(default=None, compare=False, repr=False, kw_only=True)
    #: rows computed on request for any position in [start, stop), none stored (module docstring)
    computed: bool = field(default=False, kw_only=True)

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
        if not isinstance(self.computed, bool):
            raise PosencError("computed", f"must be true or false, got {self.computed!r}")
        if self.computed and self.kind not in COMPUTED_KINDS:  # said before the range a computed table defaults to
            raise PosencError("computed", f"{self.kind} rows cannot be computed on request (the binary "
                              f"server evaluates sin and cos only): publish a stored {self.kind} table")
        if isinstance(self.encoding, LearnedSpec):
            self._check_learned()
        elif self.source is not None:
            raise PosencError("source", "only learned tables take given rows")
        if not self.computed:
            LIMITS.check_output(self.shape, OUTPUT_DTYPES[self.dtype].itemsize, field="stop")

    def _check_learned(self) -> None:
        enc = self.encoding
        if self.start < 0 or self.stop > enc.num_positions:
            raise PosencError("stop" if self.start >= 0 else "start", f"a learned table holds positions "
                              f"0..{enc.num_positions - 1}, not [{self.start}, {self.stop})")
        if self.source is not None and (not isinstance(self.source, np.ndarray)
                                        or self.source.shape != (enc.rows, enc.dim)):
            raise PosencError("source", f"must be an array of shape {(enc.rows, enc.dim)} "
                              f"(offset + num_positions, dim), got {getattr(self.source, 'shape', self.source)}")

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
        return 2 * self.encoding.n_freq if self.kind == "rope" else self.encoding.dim

    @property
    def shape(self) -> tuple[int, int]:
        return (self.rows, self.width)

    @property
    def np_dtype(self) -> np.dtype:
        return OUTPUT_DTYPES[self.dtype]

    @property
    def nbytes(self) -> int:
        """Bytes of the rows [start, stop) (a computed table stores none of them)."""
        return self.rows * self.width * self.np_dtype.itemsize

    def fill(self, out: np.ndarray, lo: int = 0, hi: int | None = None) -> None:
        """Compute rows lo..hi (relative to start) into out[lo:hi] (C-contiguous, self.dtype)."""
        hi = self.rows if hi is None else hi
        self.fill_block(out[lo:hi], lo, hi)

    def fill_block(self, block: np.ndarray, lo: int, hi: int) -> None:
        """Compute rows lo..hi (relative to start) into `block`, shape [hi - lo, width]: a
        buffer that holds one block only (the shm writer reuses one cache-sized buffer). The
        rows do not depend on the block (TableSpec.compute)."""
        if self.kind == "learned":
            if self.source is None:
                raise PosencError("source", "a learned table is published from its checkpoint rows "
                                  "(posenc.checkpoint.learned_table)")
            first = self.encoding.offset + self.start
            block[...] = self.source[first + lo:first + hi]
            return
        positions = np.arange(self.start + lo, self.start + hi, dtype=np.float64)
        self.compute(positions, self.np_dtype, out=block)

    def fill_block_crc32c(self, block: np.ndarray, lo: int, hi: int, crc: int) -> int | None:
        """fill_block and the CRC-32C of the block's bytes continuing `crc`, in one pass over
        memory: the native sin/cos kernel checksums its rows as it writes them. For the
        sinusoidal and RoPE tables whose stored bytes are the kernel's output; None, with
        nothing written, for the rest (the caller fills, then checksums)."""
        from .api.rope import rope_rows_crc32c
        from .api.sinusoidal import sinusoidal_rows_crc32c

        positions = np.arange(self.start + lo, self.start + hi, dtype=np.float64)
        if self.kind == "sinusoidal":
            return sinusoidal_rows_crc32c(positions, self.encoding, block, crc)
        if self.kind == "rope":
            return rope_rows_crc32c(positions, self.encoding, self.seq_len, block, crc)
        return None

    def compute(self, positions: np.ndarray, dtype: np.dtype, out: np.ndarray | None = None) -> np.ndarray:
        """This table's rows for any validated positions (float64; integers are taken as float64,
        which holds every position exactly), as `dtype` (into `out`, of the kernel dtype, when
        given): bit for bit the rows the table holds, since a row depends only on (spec, position,
        dtype), whatever block it is built in. Not for learned tables (their rows are given, not
        computed)."""
        from .api.rope import rope_table_at
        from .api.sinusoidal import sinusoidal_table

        positions = np.ascontiguousarray(positions, dtype=np.float64)  # no copy when it already is

        if self.kind == "sinusoidal":
            return sinusoidal_table(positions, self.encoding, dtype, out=out)
        if self.kind == "rope":
            return rope_table_at(positions, self.encoding, self.seq_len, dtype, out=out)
        if out is None:  # alibi: BLOOM's m_h * key position, formed in float64 and rounded once
            return cast_output(positions[:, None] * self.encoding.slopes[None, :], dtype)
        return np.multiply(positions[:, None], self.encoding.slopes[None, :], out=out, casting="same_kind")

    def rows_function(self, dtype: np.dtype):
        """`compute` for one dtype with everything but the positions bound once, on a native plan
        that keeps its part caches between calls (PlannedRows): f(float64 positions) -> rows, a
        computed table's per-request path. The same bits as `compute`."""
        from .api._tables import PlannedRows, constant_amplitude
        from .api.rope import rope_planned_rows

        if self.kind == "rope":
            return rope_planned_rows(self.encoding, self.seq_len, dtype)
        enc = self.encoding
        plain = self.kind == "sinusoidal" and enc.scale is None and not enc.offset
        if plain and not (enc.layout == "t2t" and enc.dim % 2):  # the kernel's rows are the whole answer
            return PlannedRows(enc.freqs, constant_amplitude(enc.n_sin, enc.amplitude), enc.column_plan(), dtype)
        return lambda positions: self.compute(positions, dtype)

    @property
    def rounds_once(self) -> bool:
        """Whether every stored value is the single rounding of its float64 value, which
        `cast_rows` relies on: not so for float32 sinusoidal tables with a per-column `scale`
        (applied in float32 after the kernel's rounding, as the binary server does too)."""
        return self.dtype == "float64" or not (self.kind == "sinusoidal" and self.encoding.scale is not None)

    def cast_rows(self, rows: np.ndarray, positions: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """Rows read from this table at `positions` as `dtype`, each value the exact value rounded
        once, exactly as the computed answer (cast once, never f64 -> f32 -> f16).

        From float64 rows of sin/cos values: the cast decides the rounding of every value not
        within 2^-48 of a rounding boundary (kernels/rounding.py); rows holding such a value (for
        float32 about one in 600 at width 128, almost never for 16-bit types) are recomputed.
        From float32 rows y = round32(x), x the exact value: y rounds to the same 16-bit value as x
        unless y is exactly a midpoint of the 16-bit grid (every such midpoint is a float32, and
        rounding is monotonic): then x's side of it is lost, so those rows alone are recomputed
        (about 1 row in 60 for float16 at width 128, 1 in 500 for bfloat16). A learned table's
        stored rows are its values (copied from the checkpoint): they are cast directly, as are
        ALiBi's products and float64 rows with a per-column `scale` (rounded from float64)."""
        if rows.dtype == dtype or self.kind == "learned":
            return cast_output(rows, dtype)
        out = cast_output(rows, dtype)
        if rows.dtype == np.float64:
            if self.kind == "alibi" or (self.kind == "sinusoidal" and self.encoding.scale is not None):
                return out
            values = rows[:, :-1] if self.kind == "sinusoidal" and self.encoding.layout == "t2t" and \
                self.encoding.dim % 2 else rows  # not t2t's zero column: 0 is never decided
            flags = ambiguous(values, self._amplitude_bound(), dtype).any(axis=1)
        else:
            if dtype.itemsize != 2:
                return out
            if not self.rounds_once:
                raise PosencError("dtype", f"this float32 table cannot give single-rounded {dtype.name} rows")
            flags, _ = midpoint_rows(rows, dtype)
        redo = np.flatnonzero(flags)
        if redo.size:
            out[redo] = self.compute(np.asarray(positions, dtype=np.float64).reshape(-1)[redo], dtype)
        return out

    def _amplitude_bound(self) -> float:
        """The largest |amplitude| of this sin/cos table's values (the attention factor of RoPE)."""
        if self.kind == "sinusoidal":
            return abs(self.encoding.amplitude)
        from .api.rope import rope_rows_at

        return float(np.abs(rope_rows_at(self.encoding, self.seq_len, np.dtype(np.float64)).amplitude).max())

    def serves_dtype(self, dtype: np.dtype) -> bool:
        """Whether rows in `dtype` come out rounded once: a computed table computes them in any
        dtype; a float64 table casts to every dtype; a float32 table gives float32, and 16-bit
        rows where its values are single-rounded (`cast_rows`)."""
        stored = self.np_dtype
        if self.computed or stored.itemsize == dtype.itemsize:
            return True
        return stored.itemsize > dtype.itemsize and self.rounds_once

    def to_dict(self) -> dict:
        d = {"encoding": self.encoding.to_dict(), "start": self.start, "stop": self.stop, "dtype": self.dtype,
             "seq_len": self.seq_len}
        if self.computed:  # written only when set: a stored table's JSON (and hash) is as before
            d["computed"] = True
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "TableSpec":
        if not isinstance(d, dict):
            raise PosencError("table", "must be an object")
        enc = d.get("encoding")
        if not isinstance(enc, dict) or not isinstance(enc.get("kind"), str) or enc["kind"] not in ENCODINGS:
            raise PosencError("encoding.kind", f"must be one of {sorted(ENCODINGS)}")
        unknown = set(d) - {"encoding", "start", "stop", "dtype", "seq_len", "computed"}
        if unknown:
            raise PosencError(sorted(unknown)[0], "is not a table field")
        try:
            encoding = ENCODINGS[enc["kind"]].from_dict(enc)
        except PosencError as exc:
            raise PosencError(f"encoding.{exc.field}", exc.message) from None
        computed = d.get("computed", False)
        # a computed table serves every position the limit admits unless its range is given
        start = d.get("start", -LIMITS.max_abs_position if computed is True else 0)
        stop = d.get("stop", LIMITS.max_abs_position + 1 if computed is True else None)
        if stop is None:
            raise PosencError("stop", "is required (one past the table's last position)")
        return cls(encoding, start, stop, d.get("dtype", "float32"), d.get("seq_len"), computed=computed)


def serves(table: dict) -> str:
    """Which sequences a table's rows are right for, from its spec dict (`TableSpec.to_dict()`):
    LongRoPE's short and long factors and dynamic NTK's frequencies depend on the sequence
    length, so their rows serve only the lengths that select them."""
    start, stop = table.get("start"), table.get("stop")
    if table.get("computed") is True:
        return f"{_sequences(table, f'any position in [{start}, {stop})')}, computed on request"
    rows = f"positions {start}..{stop - 1}" if isinstance(start, int) and isinstance(stop, int) else "its positions"
    return _sequences(table, rows)


def _sequences(table: dict, rows: str) -> str:
    """`rows` (what positions) and the sequence lengths they are right for."""
    enc, stop = table.get("encoding") or {}, table.get("stop")
    if enc.get("kind") != "rope":
        return f"{rows} of any sequence"
    rope_type, seq_len = enc.get("scaling", {}).get("rope_type"), table.get("seq_len")
    if rope_type == "longrope" and seq_len is not None:
        original = enc.get("original_max_position_embeddings") or enc.get("max_position_embeddings")
        if seq_len <= original:
            return f"{rows} of sequences up to {original} tokens (short_factor)"
        return f"{rows} of sequences longer than {original} tokens (long_factor)"
    if rope_type == "dynamic":
        longest = enc.get("max_position_embeddings")
        if seq_len is None or seq_len <= longest:
            return f"{rows} of sequences up to {longest} tokens"
        return f"{rows} of sequences of exactly {seq_len:g} tokens (dynamic NTK at that length)"
    if rope_type == "longrope":
        return f"{rows} of sequences up to {seq_len or stop} tokens (frequencies at the table's length)"
    return f"{rows} of any sequence"

