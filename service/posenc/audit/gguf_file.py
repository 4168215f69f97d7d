"""The GGUF container as llama.cpp's `gguf.cpp` lays it out: header, key/values, tensor infos, data.

Read from a path (memory-mapped) or from bytes, and the bytes may be only the start of the file: a
RoPE audit needs the metadata and at most three small float tensors (`rope_freqs`,
`rope_factors_long`, `rope_factors_short`), so a client can send the head of a multi-gigabyte model
(POST /v1/audit has a body limit). A tensor whose data lies past the bytes given is named with the
byte count that would hold it. Only GGUF v2 and v3 exist in files llama.cpp still loads (v1 used
32-bit counts); both byte orders are read (`convert_hf_to_gguf.py --bigendian`).

Self-contained on purpose: the `gguf` package maps the whole file and builds every tensor view, which
a truncated body cannot give it, and importing it costs a worker ~0.2 s.
"""

from __future__ import annotations

import math
import mmap
import struct
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from ..errors import PosencError

MAGIC = b"GGUF"
#: GGUF value types (gguf.h `enum gguf_type`): scalar ones as struct codes, 7 is bool, 8 string, 9 array.
SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
STRING, ARRAY = 8, 9
#: ggml tensor types a RoPE factor tensor can be stored in (the converter writes 1-D tensors as F32).
TENSOR_DTYPES = {0: np.dtype(np.float32), 1: np.dtype(np.float16), 30: np.dtype(ml_dtypes.bfloat16)}
DEFAULT_ALIGNMENT = 32
#: GGML_MAX_DIMS: a tensor info with more is not a tensor llama.cpp reads.
MAX_DIMS = 4
#: Arrays longer than this (a tokenizer's vocabulary, token types, merges) are stepped over, their length kept:
#: what RoPE needs (a per-layer pattern or head count, M-RoPE sections) is at most LLAMA_MAX_LAYERS long.
MAX_KEPT_ITEMS = 4096


@dataclass(frozen=True)
class TensorInfo:
    shape: tuple[int, ...]  # ggml order: ne[0] first
    ggml_type: int
    offset: int  # absolute, in the file


class _Cursor:
    """Sequential reads of the file's bytes in its byte order; running past the end is a PosencError."""

    def __init__(self, data, order: str):
        self.data, self.order, self.pos = data, order, 0

    def _short(self, what: str) -> PosencError:
        return PosencError("file", f"ends at byte {len(self.data)} inside the GGUF {what}: send more of the "
                           "file's start (the metadata and tensor infos come first)")

    def take(self, n: int, what: str):
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise self._short(what)
        out, self.pos = self.data[self.pos:end], end
        return out

    def scalar(self, code: str, what: str):
        try:
            (value,) = struct.unpack_from(self.order + code, self.data, self.pos)
        except struct.error:
            raise self._short(what) from None
        self.pos += struct.calcsize(code)
        return value

    def string(self, what: str) -> str:
        raw = bytes(self.take(self.scalar("Q", what), what))
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise PosencError("file", f"a GGUF string in the {what} is not UTF-8") from None

    def skip_strings(self, count: int, what: str) -> None:
        """Step over `count` strings (a vocabulary) without decoding them."""
        length, pos = struct.Struct(self.order + "Q").unpack_from, self.pos
        try:
            for _ in range(count):
                pos += 8 + length(self.data, pos)[0]
        except struct.error:
            raise self._short(what) from None
        if pos > len(self.data):
            raise self._short(what)
        self.pos = pos

    def value(self, vtype: int, what: str):
        if vtype in SCALARS:
            return self.scalar(SCALARS[vtype], what)
        if vtype == STRING:
            return self.string(what)
        if vtype != ARRAY:
            raise PosencError("file", f"unknown GGUF value type {vtype} in the {what}")
        item, count = self.scalar("I", what), self.scalar("Q", what)
        if item in SCALARS:
            dtype = np.dtype(self.order + SCALARS[item])
            values = self.take(count * dtype.itemsize, what)
            return np.frombuffer(values, dtype=dtype).tolist() if count <= MAX_KEPT_ITEMS else f"<{count} values>"
        if item == STRING and count > MAX_KEPT_ITEMS:
            self.skip_strings(count, what)
            return f"<{count} strings>"
        if item != STRING:  # an array of arrays, or an unknown type: gguf.cpp refuses both
            raise PosencError("file", f"a GGUF array of type {item} in the {what}: llama.cpp reads arrays of "
                              "numbers, booleans and strings only")
        return [self.string(what) for _ in range(count)]


class GgufFile:
    """`fields` (key -> value: int, float, bool, str or list) and `tensors` (name -> TensorInfo) of a GGUF
    file, and `tensor(name)` for one small float tensor's values."""

    def __init__(self, data, source: str = "the file"):
        self.data, self.source = data, source
        if bytes(data[:4]) != MAGIC:
            raise PosencError("file", "is not a GGUF file (no GGUF magic)")
        order = "<"
        version = struct.unpack("<I", bytes(data[4:8]).ljust(4, b"\0"))[0]
        if version & 0xFFFF == 0 and version:  # written big-endian
            order, version = ">", struct.unpack(">I", bytes(data[4:8]))[0]
        if version not in (2, 3):
            raise PosencError("file", f"GGUF version {version}: llama.cpp reads versions 2 and 3")
        cur = _Cursor(data, order)
        cur.take(8, "header")
        n_tensors, n_kv = cur.scalar("Q", "header"), cur.scalar("Q", "header")
        self.fields: dict = {}
        for _ in range(n_kv):
            key = cur.string("key/values")
            self.fields[key] = cur.value(cur.scalar("I", "key/values"), f"key/values ({key})")
        infos = []
        for _ in range(n_tensors):
            name = cur.string("tensor infos")
            n_dims = cur.scalar("I", "tensor infos")
            if n_dims > MAX_DIMS:
                raise PosencError("file", f"tensor {name!r} has {n_dims} dimensions; ggml has at most {MAX_DIMS}")
            dims = tuple(cur.scalar("Q", "tensor infos") for _ in range(n_dims))
            infos.append((name, dims, cur.scalar("I", "tensor infos"), cur.scalar("Q", "tensor infos")))
        alignment = self.fields.get("general.alignment", DEFAULT_ALIGNMENT)
        if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
            raise PosencError("general.alignment", f"must be a power of two, got {alignment!r}")
        start = -(-cur.pos // alignment) * alignment
        self.order = order
        self.tensors = {name: TensorInfo(dims, ggml_type, start + offset) for name, dims, ggml_type, offset in infos}

    def tensor(self, name: str) -> np.ndarray | None:
        """The values (float64, flattened) of a float tensor, None when the file has no tensor of that name."""
        info = self.tensors.get(name)
        if info is None:
            return None
        dtype = TENSOR_DTYPES.get(info.ggml_type)
        if dtype is None:
            raise PosencError(name, f"is stored as ggml type {info.ggml_type}; llama.cpp's RoPE factors are F32 "
                              "(or F16/BF16)")
        count = math.prod(info.shape)
        end = info.offset + count * dtype.itemsize
        if end > len(self.data):
            raise PosencError(name, f"its data lies at bytes {info.offset}..{end} of the file, past the "
                              f"{len(self.data)} bytes read: send at least the first {end} bytes")
        values = np.frombuffer(self.data, dtype=dtype, count=count, offset=info.offset)
        with np.errstate(invalid="ignore"):  # a NaN stays a NaN (the caller refuses it)
            return (values.byteswap() if self.order == ">" else values).astype(np.float64)

    @property
    def is_prefix(self) -> bool:
        """Whether the bytes read stop before some tensor's data ends (the head of a file, not all of it; a
        quantized tensor, of unknown size here, counts from where it starts)."""
        def end(info: TensorInfo) -> int:
            dtype = TENSOR_DTYPES.get(info.ggml_type)
            return info.offset + (math.prod(info.shape) * dtype.itemsize if dtype else 1)

        return any(end(info) > len(self.data) for info in self.tensors.values())


def open_gguf(source) -> GgufFile:
    """A GgufFile of a path (memory-mapped: nothing but the metadata and RoPE tensors is read) or of bytes."""
    if isinstance(source, str):
        try:
            with open(source, "rb") as f:
                data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if f.seek(0, 2) else b""
        except OSError as exc:
            raise PosencError("file", str(exc)) from None
        return GgufFile(data, source)
    return GgufFile(memoryview(source).cast("B"), "the body")


__all__ = ["MAGIC", "GgufFile", "TensorInfo", "open_gguf"]
