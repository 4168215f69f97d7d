"""Segment format v1 (docs/shm-format.md): a fixed 256-byte little-endian header, the
canonical spec JSON, zero padding, then the table data at a 64-byte-aligned offset.

The header CRC is always CRC-32 (zlib/IEEE, as `zlib.crc32`) over the 256 header bytes with
`state` and `header_crc` zeroed, then the spec JSON, so any language can check a header,
its `checksum` field included, with a stock CRC-32. The data checksum is the algorithm that
field names (`checksum.py`: CRC-32 or CRC-32C).

`check_header` and `check_complete` are the structural checks every reader makes, in the
order the doc lists them; native/include/posenc_shm.h makes the same ones with the same words.
"""

from __future__ import annotations

import hashlib
import json
import struct
import zlib
from dataclasses import dataclass

import numpy as np

from ..tables import TableSpec
from . import checksum
from .errors import ShmError
from .paths import MAX_GENERATION, check_name

MAGIC = b"POSENCTB"
VERSION = 1
HEADER_SIZE = 256
DATA_ALIGN = 64

#: `state` values. A zero-filled (never initialised) header is EMPTY.
EMPTY, BUILDING, READY = 0, 1, 2
STATE_NAMES = {EMPTY: "EMPTY", BUILDING: "BUILDING", READY: "READY"}
#: Index of `state` in the header viewed as uint32 words (byte offset 12).
STATE_WORD = 3

DTYPE_CODES = {"float32": 1, "float64": 2}
#: The `dtype` of a named computed encoding's segment: its data is the spec block, not rows.
SPEC = "spec"
SPEC_CODE = 3
DTYPE_NAMES = {code: name for name, code in DTYPE_CODES.items()} | {SPEC_CODE: SPEC}
ITEMSIZES = {1: 4, 2: 8, SPEC_CODE: 1}
#: A computed segment's data: i64 position_offset, u32 default_dtype (the binary protocol's dtype
#: code of the spec's `dtype`: 0 float32, 3 float64), 20 reserved zero bytes, then the inline spec
#: block of the binary protocol's ENCODE_SPEC (docs/shm-format.md, "Computed tables").
SPEC_BLOCK_PREFIX = struct.Struct("<qI20x")
WIRE_DTYPES = {"float32": 0, "float64": 3}

_LAYOUT = struct.Struct("<8sIIIIII QQqQQQq II16s64s I")
#: Header bytes 180..255 are reserved: zero, and checked to be.
RESERVED = slice(_LAYOUT.size, HEADER_SIZE)
_STATE_AND_HEADER_CRC = slice(12, 20)
_INT64_MAX = (1 << 63) - 1
_HEX = frozenset(b"0123456789abcdef")


@dataclass(frozen=True)
class Header:
    version: int
    state: int
    header_crc: int
    data_crc: int
    dtype: str
    itemsize: int
    rows: int
    width: int
    start: int
    data_offset: int
    data_nbytes: int
    generation: int
    created_ns: int
    writer_pid: int
    spec_len: int
    spec_hash: str
    name: str
    checksum: int

    @property
    def file_size(self) -> int:
        return self.data_offset + self.data_nbytes


def data_offset_for(spec_len: int) -> int:
    return -(-(HEADER_SIZE + spec_len) // DATA_ALIGN) * DATA_ALIGN


def segment_size(table: TableSpec) -> int:
    """The size of the segment file holding `table`: header, spec JSON, padding and data."""
    return data_offset_for(len(table.canonical_json.encode())) + data_nbytes(table)


def data_nbytes(table: TableSpec) -> int:
    """Bytes of the segment's data: the rows, or a computed table's spec block."""
    return len(spec_block(table)) if table.computed else table.nbytes


def spec_block(table: TableSpec) -> bytes:
    """A computed table's data: what the binary server computes its rows from. The position
    offset (a sinusoid's `offset`, e.g. M2M100's padding_idx + 1) is the server's to add, where
    an ENCODE_SPEC client adds it to the positions it sends."""
    from ..client.inline import rope_aux, sinusoidal_aux

    dtype = WIRE_DTYPES[table.dtype]
    if table.kind == "sinusoidal":
        return SPEC_BLOCK_PREFIX.pack(table.encoding.offset, dtype) + sinusoidal_aux(table.encoding)
    return SPEC_BLOCK_PREFIX.pack(0, dtype) + rope_aux(table.encoding, table.seq_len)


def pack_header(table: TableSpec, name: str, generation: int, created_ns: int, writer_pid: int,
                algorithm: int) -> bytes:
    """Header + spec JSON + zero padding up to the data (state BUILDING, checksums still zero)."""
    spec_json = table.canonical_json.encode()
    offset = data_offset_for(len(spec_json))
    code = SPEC_CODE if table.computed else DTYPE_CODES[table.dtype]
    header = _LAYOUT.pack(MAGIC, VERSION, BUILDING, 0, 0, code, ITEMSIZES[code],
                          table.rows, table.width, table.start, offset, data_nbytes(table),
                          generation, created_ns, writer_pid, len(spec_json), stored_spec_hash(spec_json).encode(),
                          name.encode(), algorithm)
    return (header + bytes(HEADER_SIZE - len(header)) + spec_json).ljust(offset, b"\0")


def header_crc(prefix: bytes | memoryview) -> int:
    """CRC-32 of the header (state and header_crc zeroed) followed by the spec JSON."""
    header = bytearray(prefix[:HEADER_SIZE])
    header[_STATE_AND_HEADER_CRC] = bytes(8)
    spec_len = struct.unpack_from("<I", header, 92)[0]
    return zlib.crc32(prefix[HEADER_SIZE:HEADER_SIZE + spec_len], zlib.crc32(header))


def set_checksums(mapping, data_crc: int) -> None:
    """Store the data CRC, then the header CRC over the finished header (writer, before READY)."""
    struct.pack_into("<I", mapping, 20, data_crc)
    struct.pack_into("<I", mapping, 16, header_crc(memoryview(mapping)[:HEADER_SIZE + _spec_len(mapping)]))


def _spec_len(buffer) -> int:
    return struct.unpack_from("<I", buffer, 92)[0]


def unpack_header(buffer, where: str) -> Header:
    """Decode a header, refusing what is not a v1 segment. `where` names the file in errors.

    Checks the file holds a header, the magic, the version and that every field is
    consistent (`_inconsistency`); not the state, the size or the checksums."""
    if len(buffer) < HEADER_SIZE:
        raise ShmError("segment", f"{where}: truncated: {len(buffer)} bytes, a header needs {HEADER_SIZE}")
    fields = _LAYOUT.unpack_from(buffer)
    magic, version = fields[:2]
    if magic != MAGIC:
        raise ShmError("segment", f"{where}: bad magic {magic!r} (expected {MAGIC!r}): not a posenc table")
    if version != VERSION:
        raise ShmError("segment", f"{where}: unknown format version {version} (this reader knows {VERSION})")
    problem = _inconsistency(fields, bytes(buffer[RESERVED]))
    if problem:
        raise ShmError("segment", f"{where}: inconsistent header: {problem}")
    (_, version, state, hcrc, dcrc, dtype, itemsize, rows, width, start, data_offset, data_nbytes, generation,
     created_ns, writer_pid, spec_len, digest, name, algorithm) = fields
    return Header(version, state, hcrc, dcrc, DTYPE_NAMES[dtype], itemsize, rows, width, start, data_offset,
                  data_nbytes, generation, created_ns, writer_pid, spec_len, digest.decode(),
                  name.rstrip(b"\0").decode(), algorithm)


def _inconsistency(fields: tuple, reserved: bytes) -> str | None:
    """What is wrong with the header fields, in the doc's order (None: nothing)."""
    (_, _, _, _, _, dtype, itemsize, rows, width, start, data_offset, nbytes, generation, _, _, spec_len,
     digest, name, algorithm) = fields
    if ITEMSIZES.get(dtype) != itemsize:
        return "unknown dtype code or itemsize"
    if rows < 1 or width < 1:
        return "rows and width must be >= 1"
    if dtype == SPEC_CODE:
        if nbytes < SPEC_BLOCK_PREFIX.size + 32 or nbytes % 8:
            return "a computed table's data_nbytes is not 32 + an inline spec block"
    elif nbytes != rows * width * itemsize:  # also refuses a product past 2**64 (data_nbytes is a u64)
        return "data_nbytes is not rows * width * itemsize"
    if start + rows > _INT64_MAX:
        return "start + rows overflows int64"
    if spec_len == 0 or data_offset != data_offset_for(spec_len):
        return "data_offset does not follow spec_len"
    if not 1 <= generation <= MAX_GENERATION:
        return "generation outside 1..2^63-1"
    if algorithm not in checksum.NAMES:
        return "unknown checksum algorithm"
    if not set(digest) <= _HEX:
        return "spec_hash is not 16 lowercase hex digits"
    if not _valid_name_field(name):
        return "name is not a valid NUL-padded table name"
    if any(reserved):
        return "reserved bytes are not zero"
    return None


def _valid_name_field(field: bytes) -> bool:
    name, _, padding = field.partition(b"\0")
    try:
        check_name(name.decode("ascii"))
    except (UnicodeDecodeError, ShmError):
        return False
    return not any(padding)


def check_complete(buffer, header: Header, where: str) -> None:
    """Refuse a file whose size is not the header's, a header whose CRC does not match, or
    non-zero padding between the spec JSON and the data."""
    if len(buffer) < header.file_size:
        raise ShmError("segment", f"{where}: truncated: {len(buffer)} bytes, the header says {header.file_size}")
    if len(buffer) > header.file_size:
        raise ShmError("segment", f"{where}: trailing bytes: {len(buffer)} bytes, the header says {header.file_size}")
    expected = header_crc(memoryview(buffer)[:HEADER_SIZE + header.spec_len])
    if expected != header.header_crc:
        raise ShmError("segment", f"{where}: header checksum mismatch (stored {header.header_crc:#010x}, "
                       f"computed {expected:#010x})")
    if any(memoryview(buffer)[HEADER_SIZE + header.spec_len:header.data_offset]):
        raise ShmError("segment", f"{where}: non-zero padding after the spec JSON")


def stored_spec_hash(spec_json: bytes) -> str:
    """The `spec_hash` of a segment: first 16 hex digits of SHA-256 of the stored spec bytes
    exactly. Over the bytes, not a re-serialised form, so a reader in any language (the C
    header included) checks it without parsing JSON; posenc writes `TableSpec.canonical_json`,
    whose digest is `TableSpec.hash`."""
    return hashlib.sha256(spec_json).hexdigest()[:16]


def _no_duplicate_keys(pairs: list) -> dict:
    """json.loads hook: a key given twice is refused (readers in other languages may keep the first)."""
    out = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def spec_of(buffer, header: Header, where: str) -> TableSpec:
    """The TableSpec stored in the segment, checked against the header's hash and shape."""
    raw = bytes(buffer[HEADER_SIZE:HEADER_SIZE + header.spec_len])
    if stored_spec_hash(raw) != header.spec_hash:
        raise ShmError("segment", f"{where}: spec JSON does not match its hash {header.spec_hash}")
    try:
        table = TableSpec.from_dict(json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicate_keys))
    except ValueError as exc:  # bad UTF-8 or JSON, or a spec this version of posenc rejects (PosencError)
        raise ShmError("segment", f"{where}: unusable spec JSON ({exc})") from None
    stored = SPEC if table.computed else table.dtype
    if (table.rows, table.width, table.start, stored) != (header.rows, header.width, header.start, header.dtype):
        raise ShmError("segment", f"{where}: header shape disagrees with its spec")
    if table.computed and bytes(buffer[header.data_offset:header.file_size]) != spec_block(table):
        raise ShmError("segment", f"{where}: the computed table's spec block is not its spec JSON's")
    return table


def check_data(data: np.ndarray, header: Header, where: str) -> None:
    actual = checksum.compute(header.checksum, data)
    if actual != header.data_crc:
        raise ShmError("segment", f"{where}: data checksum mismatch (stored {header.data_crc:#010x}, "
                       f"computed {actual:#010x}, {checksum.NAMES[header.checksum]}): the table was modified or "
                       "corrupted")
