"""The wire format of docs/protocol.md in Python: constants, header packing and reply decoding.

The numbers mirror `native/include/posenc_proto.h`; tests/test_binary_protocol.py checks that
the two agree, so neither can drift alone.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from ..dtypes import OUTPUT_DTYPES
from ..errors import PosencError

VERSION = 1
HEADER_SIZE = 32
DEFAULT_PORT = 8001
SPEC_PREFIX_SIZE = 32

#: u32 length, u8 version, u8 opcode, u8 dtype, u8 position_kind, u64 request_id, u32 table_id,
#: u32 count, u32 aux_len, u32 reserved
REQUEST = struct.Struct("<IBBBBQIIII")
#: u32 length, u8 version, u8 opcode, u8 status, u8 dtype, u64 request_id, u32 rows, u32 width,
#: u32 aux_len, u32 table_id
RESPONSE = struct.Struct("<IBBBBQIIII")
#: u32 n_freq, u32 row_width, u32 sin_base, u32 cos_base, u32 n_cos, u32 flags, f64 amplitude
SPEC_PREFIX = struct.Struct("<IIIIIId")


class Opcode(IntEnum):
    PING = 1
    STATS = 2
    LIST_TABLES = 3
    RESOLVE = 4
    ENCODE_TABLE = 5
    ENCODE_SPEC = 6


class Status(IntEnum):
    OK = 0
    BAD_FRAME = 1
    BAD_VERSION = 2
    UNKNOWN_OPCODE = 3
    FRAME_TOO_LARGE = 4
    TOO_MANY_POSITIONS = 5
    UNKNOWN_TABLE = 6
    POSITION_OUT_OF_RANGE = 7
    BAD_ARGUMENT = 8
    OUTPUT_TOO_LARGE = 9
    TOO_MANY_CONNECTIONS = 10
    SHUTTING_DOWN = 11
    TABLE_UNAVAILABLE = 12
    INTERNAL = 13
    IDLE_TIMEOUT = 14


#: Statuses after which the server closes the connection.
CLOSING_STATUSES = frozenset({Status.BAD_FRAME, Status.BAD_VERSION, Status.UNKNOWN_OPCODE, Status.FRAME_TOO_LARGE,
                              Status.TOO_MANY_CONNECTIONS, Status.SHUTTING_DOWN, Status.IDLE_TIMEOUT})


class WireDtype(IntEnum):
    FLOAT32 = 0
    FLOAT16 = 1
    BFLOAT16 = 2
    FLOAT64 = 3


class PositionKind(IntEnum):
    INT64 = 0
    FLOAT64 = 1


class SpecFlag(IntEnum):
    INTERLEAVED = 1
    ZERO_LAST = 2
    COLUMN_SCALE = 4


WIRE_DTYPES = {"float32": WireDtype.FLOAT32, "float16": WireDtype.FLOAT16, "bfloat16": WireDtype.BFLOAT16,
               "float64": WireDtype.FLOAT64}
NUMPY_DTYPES = {code: OUTPUT_DTYPES[name] for name, code in WIRE_DTYPES.items()}


class ServerError(PosencError):
    """The server answered with an error frame. `status` is the Status code; `field` and the
    message come from its "field: message" text; `closes` says the connection is gone."""

    def __init__(self, status: int, text: str, request_id: int = 0):
        field, sep, message = text.partition(": ")
        if not sep:
            field, message = "request", text
        self.status = Status(status) if status in Status._value2member_map_ else status
        self.request_id = request_id
        self.closes = status in CLOSING_STATUSES
        super().__init__(field, message)


class ProtocolError(ConnectionError):
    """The byte stream from the server was not a valid reply (or ended inside one)."""


def wire_dtype(dtype) -> WireDtype:
    name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    if name not in WIRE_DTYPES:
        raise PosencError("dtype", f"unsupported dtype {dtype!r}; choose one of {sorted(WIRE_DTYPES)}")
    return WIRE_DTYPES[name]


def wire_positions(positions) -> tuple[PositionKind, bytes, int]:
    """(kind, little-endian bytes, count): integers travel as int64, anything else as float64.
    Values are checked by the server (range, finiteness), which names the bad element."""
    try:
        arr = np.asarray(positions)
    except (TypeError, ValueError) as exc:
        raise PosencError("positions", f"must be a number or a 1-D array of numbers ({exc})") from None
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise PosencError("positions", f"must be 1-D, got shape {arr.shape}")
    if arr.dtype.kind in "iu":
        if arr.size and arr.dtype.kind == "u" and int(arr.max()) > np.iinfo(np.int64).max:
            raise PosencError("positions", "must fit in int64")
        return PositionKind.INT64, arr.astype("<i8", copy=False).tobytes(), arr.size
    if arr.dtype.kind == "f":
        return PositionKind.FLOAT64, arr.astype("<f8", copy=False).tobytes(), arr.size
    raise PosencError("positions", f"must be numbers, got dtype {arr.dtype}")


def request_frame(opcode: Opcode, request_id: int, *, aux: bytes = b"", positions: bytes = b"", count: int = 0,
                  table_id: int = 0, dtype: int = 0, position_kind: int = 0) -> bytes:
    length = HEADER_SIZE + len(aux) + len(positions)
    return REQUEST.pack(length, VERSION, opcode, dtype, position_kind, request_id, table_id, count, len(aux),
                        0) + aux + positions


@dataclass(frozen=True)
class Reply:
    """One decoded reply frame (a success: errors become ServerError)."""

    opcode: int
    request_id: int
    dtype: int
    rows: int
    width: int
    table_id: int
    aux: bytes
    body: bytes | bytearray | memoryview

    def array(self) -> np.ndarray:
        """The rows as a [rows, width] array of the reply's dtype (a view of the received bytes)."""
        dt = NUMPY_DTYPES[WireDtype(self.dtype)].newbyteorder("<")
        return np.frombuffer(self.body, dtype=dt).reshape(self.rows, self.width)

    def json(self):
        return json.loads(self.aux)


def parse_header(header: bytes) -> tuple:
    """(length, opcode, status, dtype, request_id, rows, width, aux_len, table_id), checked."""
    length, version, opcode, status, dtype, request_id, rows, width, aux_len, table_id = RESPONSE.unpack(header)
    if version != VERSION or length < HEADER_SIZE or aux_len > length - HEADER_SIZE:
        raise ProtocolError(f"bad reply header (version {version}, length {length}, aux_len {aux_len})")
    if status == Status.OK:
        itemsize = NUMPY_DTYPES[WireDtype(dtype)].itemsize if dtype in WireDtype._value2member_map_ else 0
        if length != HEADER_SIZE + aux_len + rows * width * itemsize:
            raise ProtocolError(f"reply length {length} does not match {rows}x{width} rows of dtype {dtype}")
    return length, opcode, status, dtype, request_id, rows, width, aux_len, table_id


def reply_from(fields: tuple, payload: bytes | bytearray) -> Reply:
    """A Reply, or ServerError for an error frame. `payload` is everything after the header."""
    _, opcode, status, dtype, request_id, rows, width, aux_len, table_id = fields
    aux = bytes(payload[:aux_len])
    if status != Status.OK:
        raise ServerError(status, aux.decode("utf-8", "replace"), request_id)
    return Reply(opcode, request_id, dtype, rows, width, table_id, aux, memoryview(payload)[aux_len:])
