"""Segment format v1 (docs/shm-format.md): a fixed 256-byte little-endian header, the
canonical spec JSON, then the table data at a 64-byte-aligned offset.

Checksums are CRC-32 (zlib/IEEE, as `zlib.crc32`): the data CRC covers the data bytes,
the header CRC covers the 256 header bytes with `state` and `header_crc` zeroed, then the
spec JSON. Any language can verify both with a stock CRC-32.
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass

import numpy as np

from ..encodings.canonical import spec_hash
from ..tables import TableSpec
from .errors import ShmError

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
DTYPE_NAMES = {code: name for name, code in DTYPE_CODES.items()}

_LAYOUT = struct.Struct("<8sIIIIII QQqQQQq II16s64s80x")
assert _LAYOUT.size == HEADER_SIZE
_STATE_AND_HEADER_CRC = slice(12, 20)


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

    @property
    def file_size(self) -> int:
        return self.data_offset + self.data_nbytes


def data_offset_for(spec_len: int) -> int:
    return -(-(HEADER_SIZE + spec_len) // DATA_ALIGN) * DATA_ALIGN


def pack_header(table: TableSpec, name: str, generation: int, created_ns: int, writer_pid: int) -> bytes:
    """Header + spec JSON for a new segment (state BUILDING, checksums still zero)."""
    spec_json = table.canonical_json.encode()
    header = _LAYOUT.pack(MAGIC, VERSION, BUILDING, 0, 0, DTYPE_CODES[table.dtype], table.np_dtype.itemsize,
                          table.rows, table.width, table.start, data_offset_for(len(spec_json)), table.nbytes,
                          generation, created_ns, writer_pid, len(spec_json), table.hash.encode(), name.encode())
    return header + spec_json


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

    Checks magic, version, dtype and that offsets and sizes agree; not state, size or CRCs."""
    if len(buffer) < HEADER_SIZE:
        raise ShmError("segment", f"{where}: truncated: {len(buffer)} bytes, a header needs {HEADER_SIZE}")
    (magic, version, state, hcrc, dcrc, dtype, itemsize, rows, width, start, data_offset, data_nbytes, generation,
     created_ns, writer_pid, spec_len, digest, name) = _LAYOUT.unpack_from(buffer)
    if magic != MAGIC:
        raise ShmError("segment", f"{where}: bad magic {magic!r} (expected {MAGIC!r}): not a posenc table")
    if version != VERSION:
        raise ShmError("segment", f"{where}: unknown format version {version} (this reader knows {VERSION})")
    if dtype not in DTYPE_NAMES or np.dtype(DTYPE_NAMES[dtype]).itemsize != itemsize:
        raise ShmError("segment", f"{where}: unknown dtype code {dtype} / itemsize {itemsize}")
    if (data_offset != data_offset_for(spec_len) or data_nbytes != rows * width * itemsize
            or rows < 1 or width < 1):
        raise ShmError("segment", f"{where}: inconsistent header (data offset {data_offset}, {data_nbytes} bytes "
                       f"for {rows}x{width}, spec {spec_len} bytes)")
    return Header(version, state, hcrc, dcrc, DTYPE_NAMES[dtype], itemsize, rows, width, start, data_offset,
                  data_nbytes, generation, created_ns, writer_pid, spec_len, digest.decode("ascii", "replace"),
                  name.rstrip(b"\0").decode("ascii", "replace"))


def check_complete(buffer, header: Header, where: str) -> None:
    """Refuse a file shorter than its header says or a header whose CRC does not match."""
    if len(buffer) < header.file_size:
        raise ShmError("segment", f"{where}: truncated: {len(buffer)} bytes, the header says {header.file_size}")
    expected = header_crc(memoryview(buffer)[:HEADER_SIZE + header.spec_len])
    if expected != header.header_crc:
        raise ShmError("segment", f"{where}: header checksum mismatch (stored {header.header_crc:#010x}, "
                       f"computed {expected:#010x})")


def spec_of(buffer, header: Header, where: str) -> TableSpec:
    """The TableSpec stored in the segment, checked against the header's hash and shape."""
    try:
        spec = json.loads(bytes(buffer[HEADER_SIZE:HEADER_SIZE + header.spec_len]))
        if spec_hash(spec) != header.spec_hash:
            raise ShmError("segment", f"{where}: spec JSON does not match its hash {header.spec_hash}")
        table = TableSpec.from_dict(spec)
    except ShmError:
        raise
    except ValueError as exc:  # bad JSON, or a spec this version of posenc rejects (PosencError)
        raise ShmError("segment", f"{where}: unusable spec JSON ({exc})") from None
    if (table.rows, table.width, table.start, table.dtype) != (header.rows, header.width, header.start, header.dtype):
        raise ShmError("segment", f"{where}: header shape disagrees with its spec")
    return table


def data_crc(data: np.ndarray) -> int:
    return zlib.crc32(data)


def check_data(data: np.ndarray, header: Header, where: str) -> None:
    actual = data_crc(data)
    if actual != header.data_crc:
        raise ShmError("segment", f"{where}: data checksum mismatch (stored {header.data_crc:#010x}, "
                       f"computed {actual:#010x}): the table was modified or corrupted")
