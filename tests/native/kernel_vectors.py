"""Golden vectors for tests/c/kernel_vectors.c: inputs and the bytes every native path must give.

The expected outputs come from the numba kernels (the package's reference of the native
ones: same operation sequence, vsincos.h and kernels/trig.py), from orjson for JSON text and
from the bitwise CRC-32C for checksums, computed on this machine. The C program replays them
through the shipped library on whatever CPU runs it (native, qemu-x86_64 CPU models,
qemu-aarch64), so a path that differs by one bit on some CPU fails there.

What is covered: the hard angles of golden_sincos.json, sinusoidal tables in every layout over
odd and even widths with integer, negative, fractional, near-2^31 and up to 2^53 positions (every split of
a position the kernels use), RoPE-style frequency sets, RoPE rotation (half and interleaved,
partial rotary, both dtypes), ALiBi in its three modes, JSON of special and random float32
values, and CRC-32C over lengths that cross every kernel's block sizes.

    python tests/native/kernel_vectors.py OUT   (the test writes its own copy)
"""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

import numpy as np
import orjson

from posenc import kernels
from posenc.encodings import SinusoidalSpec
from posenc.kernels.alibi import MODES

HERE = Path(__file__).resolve().parent
DTYPES = {"float32": 0, "float64": 1}
FILL = 0x7F  # the bytes a layout leaves alone (kernel_vectors.c fills its output the same way)
SINCOS, ROPE, ALIBI, JSON, CRC32C = 1, 2, 3, 4, 5


def record(kind: int, params: list[int], arrays: list[bytes]) -> bytes:
    head = struct.pack(f"<II{len(params)}qI", kind, len(params), *params, len(arrays))
    return head + b"".join(struct.pack("<Q", len(a)) + a for a in arrays)


def positions() -> np.ndarray:
    """Integers across the coarse/fine splits, negatives, fractions, the 2^31 edge, and int64 ids up
    to 2^53 (parts whose products pass 2^45 take vsincos.h's 2*pi step first)."""
    ints = [0, 1, 2, 15, 16, 17, 1023, 1024, 1025, 4095, 4096, 65535, 65536, 131071, 500000, 1 << 20]
    edge = [2**31 - 1, 2**31 - 2, 2**31 - 1024, 2**30 + 7]
    ids = [1_700_000_000_123, 2**53 - 1, -(2**53 - 1025), 2**53, 3 * 2**50 + 0.5]
    return np.array(ints + [-p for p in ints[1:8]] + edge + ids
                    + [-2.0**31, 0.5, -0.25, 1e-3, 1234.567, 2.0**24 + 0.5], dtype=np.float64)


def sincos_record(pos: np.ndarray, freqs: np.ndarray, amp: np.ndarray, plan, dtype: str) -> bytes:
    n_sin = freqs.shape[0]
    out = np.full(pos.shape[0] * plan.row_stride * np.dtype(dtype).itemsize, FILL, dtype=np.uint8).view(dtype)
    kernels.sincos_rows(pos, freqs, amp, out, plan.row_stride, plan.sin_base, plan.cos_base, plan.interleaved,
                        plan.n_cos, 0, pos.shape[0])
    dense = plan.row_stride == n_sin + plan.n_cos
    params = [pos.shape[0], n_sin, plan.row_stride, plan.sin_base, plan.cos_base, plan.n_cos, int(plan.interleaved),
              DTYPES[dtype], int(dense)]
    return record(SINCOS, params, [pos.tobytes(), freqs.tobytes(), amp.tobytes(), out.tobytes()])


def sincos_records() -> list[bytes]:
    from posenc.encodings.columns import ColumnPlan

    pair = ColumnPlan(row_stride=2, sin_base=0, cos_base=1, interleaved=True, n_cos=1)
    golden = json.loads((HERE / "golden_sincos.json").read_text())["cases"]
    out = []
    for dtype in DTYPES:
        for case in golden:  # one row each: the hardest single angles
            p, w = float.fromhex(case["position"]), float.fromhex(case["freq"])
            out.append(sincos_record(np.array([p]), np.array([w]), np.ones(1), pair, dtype))
        for dim in (1, 3, 8, 33, 64, 128, 130):
            for layout in ("interleaved", "halves", "t2t"):
                spec = SinusoidalSpec(dim, layout=layout)
                if spec.n_sin:
                    out.append(sincos_record(positions(), spec.freqs, np.full(spec.n_sin, spec.amplitude),
                                             spec.column_plan(), dtype))
        for head_dim, base in ((64, 10000.0), (128, 500000.0), (96, 1e6)):  # RoPE [cos | sin] rows
            freqs = base ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
            half = freqs.shape[0]
            plan = ColumnPlan(row_stride=2 * half, sin_base=half, cos_base=0, interleaved=False, n_cos=half)
            out.append(sincos_record(positions(), freqs, np.full(half, 1.0 + 0.1 * np.log(4.0)), plan, dtype))
    return out


def rope_records(rng: np.random.Generator) -> list[bytes]:
    out = []
    for dtype in DTYPES:
        for head_dim, n_freq in ((8, 4), (64, 32), (130, 65), (128, 16)):  # the last: partial rotary
            for interleaved in (False, True):
                batch, n = 2, 37
                x = rng.standard_normal((batch, n, head_dim)).astype(dtype)
                angles = np.arange(n, dtype=np.float64)[:, None] * 10000.0 ** (-np.arange(n_freq) / n_freq)
                cos, sin = np.cos(angles), np.sin(angles)
                result = np.empty_like(x)
                kernels.rope_rotate_rows(x, cos, sin, interleaved, result, 0, n)
                out.append(record(ROPE, [batch, n, head_dim, n_freq, int(interleaved), DTYPES[dtype]],
                                  [x.tobytes(), cos.tobytes(), sin.tobytes(), result.tobytes()]))
    return out


def alibi_records() -> list[bytes]:
    out = []
    slopes = 2.0 ** (-8.0 * np.arange(1, 9) / 8)
    q_pos = np.array([0.0, 1, 5, 100, 4095, 70000], dtype=np.float64)
    k_pos = np.arange(0, 130, dtype=np.float64) * 3.0
    for dtype in DTYPES:
        for mode in MODES.values():
            result = np.empty((slopes.shape[0], q_pos.shape[0], k_pos.shape[0]), dtype=dtype)
            kernels.alibi_bias_rows(slopes, q_pos, k_pos, mode, result, 0, q_pos.shape[0])
            out.append(record(ALIBI, [slopes.shape[0], q_pos.shape[0], k_pos.shape[0], mode, DTYPES[dtype]],
                              [slopes.tobytes(), q_pos.tobytes(), k_pos.tobytes(), result.tobytes()]))
    return out


def json_records(rng: np.random.Generator) -> list[bytes]:
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.1, 1e-45, 3.4028235e38, 1.1754944e-38,
                        123456789.0, 1e16, 1e-7, 0.5, 2.0**-126], dtype=np.float32)
    random_bits = rng.integers(0, 2**32, size=4096, dtype=np.uint64).astype(np.uint32).view(np.float32)
    arrays = [special, random_bits.reshape(64, 64), np.sin(np.arange(360, dtype=np.float32)).reshape(3, 4, 30),
              np.zeros((0,), np.float32), np.zeros((2, 0), np.float32), np.float32(0.3) * np.ones((1, 1), np.float32)]
    out = []
    for values in arrays:
        text = orjson.dumps(values, option=orjson.OPT_SERIALIZE_NUMPY)
        out.append(record(JSON, [values.ndim, *values.shape], [values.tobytes(), text]))
    return out


def crc_records(rng: np.random.Generator) -> list[bytes]:
    from posenc.shm.checksum import crc32c

    out = []
    for length, seed in ((0, 0), (1, 0), (7, 0xDEADBEEF), (64, 0), (1000, 1), (4096 + 3, 0), (65537, 7)):
        data = rng.integers(0, 256, size=length, dtype=np.uint8).tobytes()
        expected = crc32c(data, seed, native=False)  # the numba slice-by-8 reference
        out.append(record(CRC32C, [seed], [data, struct.pack("<I", expected)]))
    return out


def write(path: Path) -> int:
    """Write every vector to `path`; the number of vectors."""
    rng = np.random.default_rng(22)
    records = sincos_records() + rope_records(rng) + alibi_records() + json_records(rng) + crc_records(rng)
    path.write_bytes(b"".join(records))
    return len(records)


if __name__ == "__main__":
    print(write(Path(sys.argv[1])), "vectors")
