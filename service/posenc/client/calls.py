"""One `Call` per operation: the request frame fields plus how to decode the reply. The sync and
asyncio clients differ only in how they move the bytes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..api.rope import as_rope_spec
from ..api.sinusoidal import shifted
from ..args import as_positions
from ..encodings import SinusoidalSpec
from ..errors import PosencError
from .inline import mrope_auxes, mrope_rows, spec_aux
from .protocol import Opcode, Reply, request_frame, wire_dtype, wire_positions


@dataclass(frozen=True)
class TableRef:
    """A table as RESOLVE describes it; `id` is what ENCODE_TABLE requests carry."""

    id: int
    name: str
    generation: int
    dtype: str
    rows: int
    width: int
    start: int
    stop: int
    spec: dict

    @classmethod
    def from_reply(cls, reply: Reply) -> TableRef:
        d = reply.json()
        return cls(reply.table_id, d["name"], d["generation"], d["dtype"], d["rows"], d["width"], d["start"],
                   d["stop"], d["spec"])


@dataclass(frozen=True)
class Call:
    opcode: Opcode
    decode: Callable[[Reply], Any]
    aux: bytes = b""
    positions: bytes = b""
    count: int = 0
    table_id: int = 0
    dtype: int = 0
    position_kind: int = 0

    def frame(self, request_id: int) -> bytes:
        return request_frame(self.opcode, request_id, aux=self.aux, positions=self.positions, count=self.count,
                             table_id=self.table_id, dtype=self.dtype, position_kind=self.position_kind)


def ping(payload: bytes = b"") -> Call:
    return Call(Opcode.PING, lambda r: r.aux, aux=bytes(payload))


def stats() -> Call:
    return Call(Opcode.STATS, Reply.json)


def list_tables() -> Call:
    return Call(Opcode.LIST_TABLES, Reply.json)


def resolve(name: str) -> Call:
    if not isinstance(name, str):
        raise PosencError("name", f"must be a string, got {type(name).__name__}")
    return Call(Opcode.RESOLVE, TableRef.from_reply, aux=name.encode())


def encode_table(table_id: int, positions, dtype="float32") -> Call:
    kind, raw, count = wire_positions(positions)
    return Call(Opcode.ENCODE_TABLE, Reply.array, positions=raw, count=count, table_id=table_id,
                dtype=wire_dtype(dtype), position_kind=kind)


def encode_spec(spec, positions, dtype="float32", seq_len=None) -> Call:
    if isinstance(spec, SinusoidalSpec) and spec.offset:  # the server evaluates rows at the shifted positions
        positions = shifted(as_positions(positions), spec.offset)
    kind, raw, count = wire_positions(positions)
    values = np.frombuffer(raw, dtype="<i8" if kind == 0 else "<f8")
    return _spec_call(spec_aux(spec, values, seq_len), (kind, raw, count), dtype)


def _spec_call(aux: bytes, wire: tuple, dtype) -> Call:
    """ENCODE_SPEC of an inline-spec block for positions already in wire form (kind, bytes, count)."""
    kind, raw, count = wire
    return Call(Opcode.ENCODE_SPEC, Reply.array, aux=aux, positions=raw, count=count, dtype=wire_dtype(dtype),
                position_kind=kind)


def is_mrope(spec, positions) -> bool:
    """[3, n] positions: M-RoPE, which travels as several ENCODE_SPEC calls (`encode_mrope`)."""
    return np.ndim(positions) == 2 and not isinstance(spec, SinusoidalSpec)


def encode_mrope(spec, positions, dtype="float32", seq_len=None) -> tuple[list[Call], Callable[[list], np.ndarray]]:
    """M-RoPE rows [n, 2*n_freq] for positions [3, n] (temporal, height, width): one ENCODE_SPEC
    per frequency chunk (docs/protocol.md, *M-RoPE*), and the function that assembles the replies."""
    spec = as_rope_spec(spec)
    arr = np.asarray(positions)
    if spec.mrope_section is None or arr.shape[0] != 3:
        raise PosencError("positions", "2-D positions are M-RoPE [3, n] (temporal, height, width), which needs "
                          f"a spec with mrope_section; got shape {list(arr.shape)}")
    chunks = mrope_auxes(spec, arr, seq_len)
    batch = [_spec_call(aux, wire_positions(arr[axis]), dtype) for _, _, axis, aux in chunks]

    def assemble(replies: list) -> np.ndarray:
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        return mrope_rows(spec, [(first, end) for first, end, _, _ in chunks], replies)

    return batch, assemble
