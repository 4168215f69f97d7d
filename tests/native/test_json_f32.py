"""libposenc's float32 -> JSON printer (posenc_json_f32) against orjson, byte for byte, on every writer.

The exhaustive check over all 2^32 float32 bit patterns is offline (native/tools/json_f32_exhaustive.py);
here: every notation threshold and its neighbours, the exponent range's powers of 2 and 10, the
subnormals and the specials, a few million random bit patterns, shapes, and the buffer contract.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import orjson
import pytest
from posenc import native
from posenc.native import json_text
from posenc.native.library import EINVAL

ROOT = Path(__file__).resolve().parents[2]
needs_library = pytest.mark.skipif(not json_text.available(), reason=f"libposenc unavailable: {native.STATUS}")
pytestmark = needs_library


def orjson_text(arr: np.ndarray) -> bytes:
    """What codecs.json_data printed before the native printer: orjson's numpy serializer."""
    arr = np.asarray(arr)
    if arr.ndim == 0:
        return orjson.dumps(arr.reshape(1), option=orjson.OPT_SERIALIZE_NUMPY)[1:-1]
    return orjson.dumps(arr, option=orjson.OPT_SERIALIZE_NUMPY)


@pytest.fixture(params=json_text.WRITERS)
def write(request):
    """One writer's printer; skips the AVX-512 writer where the CPU lacks AVX-512 F/BW/DQ/CD/VL."""
    name = request.param
    if json_text.json_f32_by(name, np.zeros(1, np.float32)) is None:
        pytest.skip(f"this CPU cannot run the {name} JSON writer (detected: {native.cpu_features()})")
    return lambda arr: json_text.json_f32_by(name, arr)


def f32(bits) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint64).astype(np.uint32).view(np.float32)


def neighbours(values) -> np.ndarray:
    """Each float32 value, the next one down and the next one up (both signs)."""
    center = np.asarray(values, dtype=np.float32)
    below = np.nextafter(center, np.float32(-np.inf))
    above = np.nextafter(center, np.float32(np.inf))
    out = np.concatenate([center, below, above])
    return np.concatenate([out, -out])


def assert_same(ours: bytes, arr: np.ndarray) -> None:
    theirs = orjson_text(arr)
    if ours == theirs:
        return
    mine, numbers = ours.strip(b"[]").split(b","), theirs.strip(b"[]").split(b",")
    flat = np.asarray(arr).reshape(-1)
    diffs = [(hex(int(flat.view(np.uint32)[i])), numbers[i], mine[i]) for i in range(min(len(mine), len(numbers)))
             if mine[i] != numbers[i]]
    pytest.fail(f"{len(diffs)} numbers differ from orjson (bits, orjson, ours): {diffs[:10]}")


EDGES = np.array([0.0, -0.0, 1.0, -1.0, 0.1, 0.5, 1.5, 100.0, 1e13, 1e-7, 1.5e-6, 123456789012.0, 16777216.0,
                  1e-45, 1.17549435e-38, 3.4028235e38, 9.999999e12, 1e12, 1e14, 1e-5, 1e-6, 1.2345678e-7,
                  1.2345678e-6, 0.99999994, 2.5, 0.3, 2.0 / 3.0], np.float32)


def test_edges(write):
    assert_same(write(EDGES), EDGES)
    specials = f32([0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FBFFFFF, 0xFFFFFFFF, 0x7F800000, 0xFF800000])
    assert write(specials) == b"[" + b",".join([b"null"] * 7) + b"]"
    assert write(np.array([0.0, -0.0], np.float32)) == b"[0.0,-0.0]"


def test_notation_examples(write):
    expect = {1e13: b"1e+13", 1e-7: b"1e-7", 1.5e-6: b"0.0000015", 123456789012: b"123456790000.0",
              16777216: b"16777216.0", -0.0: b"-0.0", 1e-45: b"1e-45", 1.17549435e-38: b"1.1754944e-38",
              3.4028235e38: b"3.4028235e+38", 1e12: b"1000000000000.0", 1e-6: b"0.000001"}
    for value, text in expect.items():
        assert write(np.array(value, np.float32)) == text, value


def test_subnormals_and_range_ends(write):
    smallest = [1, 2, 3, 7, 8, 9, 10, 0x7FFFFF, 0x800000, 0x800001, 0x7F7FFFFF, 0x7F7FFFFE, 0x00400000]
    values = f32(smallest + [0x80000000 | b for b in smallest])
    assert_same(write(values), values)
    every_small = f32(np.arange(0, 1 << 16))  # the first 65536 subnormals, each one
    assert_same(write(every_small), every_small)


def test_powers_of_two_and_ten(write):
    twos = neighbours(np.ldexp(np.float32(1), np.arange(-149, 128)).astype(np.float32))
    assert_same(write(twos), twos)
    tens = neighbours(np.array([10.0**e for e in range(-45, 39)], dtype=np.float64).astype(np.float32))
    tens = tens[np.isfinite(tens)]
    assert_same(write(tens), tens)


def test_each_notation_threshold(write):
    """Around 10^p for every p where orjson changes notation, and every digit count there."""
    base = [1e-6, 1e-5, 1e13, 1e14, 1e-7, 1.0, 10.0, 1e7, 1e8, 1e9]
    digits = [float(f"{m}e{e}") for e in range(-8, 16) for m in ("1.2345678", "9.9999995", "1.5", "9.25")]
    values = neighbours(np.array(base + digits, dtype=np.float64).astype(np.float32))
    assert_same(write(values), values)


def test_random_bit_patterns(write):
    rng = np.random.default_rng(20261201)
    values = f32(rng.integers(0, 1 << 32, size=3_000_000, dtype=np.uint64))
    assert_same(write(values), values)


def test_random_short_decimals(write):
    """Values with few digits (the multiple-of-ten branch) and positional-encoding-like values."""
    rng = np.random.default_rng(7)
    short = (rng.integers(-99999, 99999, size=200_000) * 10.0 ** rng.integers(-12, 12, size=200_000))
    values = np.concatenate([short.astype(np.float32), np.sin(np.arange(200_000) * 0.37).astype(np.float32)])
    assert_same(write(values), values)


@pytest.mark.parametrize("shape", [(), (1,), (7,), (9,), (16,), (2, 3), (3, 1), (1, 128), (5, 17), (2, 3, 4),
                                   (2, 1, 3, 2), (0,), (0, 3), (3, 0), (2, 0, 3), (1, 0)])
def test_shapes(write, shape):
    """Nesting like orjson's for every dimension count, row lengths around the 8-wide steps, and empties."""
    arr = (np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) - 3) / 7
    assert write(arr) == orjson_text(arr)


def test_writers_agree_on_a_table():
    pos = np.arange(64)[:, None] * 10000.0 ** (-np.arange(64) / 64)
    table = np.concatenate([np.sin(pos), np.cos(pos)], axis=1).astype(np.float32)
    texts = {name: json_text.json_f32_by(name, table) for name in json_text.WRITERS}
    assert {text for text in texts.values() if text is not None} == {orjson_text(table)}


def test_refuses_what_is_not_contiguous_float32():
    with pytest.raises(ValueError):
        json_text.json_f32(np.zeros(4, np.float64))
    with pytest.raises(ValueError):
        json_text.json_f32(np.zeros((4, 4), np.float32)[:, ::2])


def test_grows_its_buffer_and_prints_large_arrays_once():
    """Past the per-thread buffer (64 KiB at first) and past KEEP_BYTES (a one-off buffer)."""
    for size in (10_000, json_text.KEEP_BYTES // 8):
        arr = np.random.default_rng(size).standard_normal(size).astype(np.float32)
        assert json_text.json_f32(arr) == orjson_text(arr)
    small = np.arange(3, dtype=np.float32)
    assert json_text.json_f32(small) == b"[0.0,1.0,2.0]"


def test_threads_get_their_own_buffers():
    arrays = [np.full((50, 200), i, np.float32) / 3 for i in range(4)]
    results: dict[int, list[bool]] = {i: [] for i in range(4)}

    def work(i):
        for _ in range(50):
            results[i].append(json_text.json_f32(arrays[i]) == orjson_text(arrays[i]))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(all(r) and len(r) == 50 for r in results.values())


def _c_api():
    lib = native.LIBRARY
    write, capacity = lib.posenc_json_f32, lib.posenc_json_f32_capacity
    write.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int64]
    write.restype = capacity.restype = ctypes.c_int64
    capacity.argtypes = [ctypes.c_void_p, ctypes.c_int]
    return write, capacity


def test_capacity_contract():
    """Too small a buffer: minus the capacity, nothing written; bad shapes: EINVAL."""
    write, capacity = _c_api()
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    shape = (ctypes.c_int64 * 2)(2, 3)
    need = capacity(shape, 2)
    assert need == 6 * 18 + 3 * (1 + 2) + 48
    out = ctypes.create_string_buffer(b"\xAA" * need, need)
    assert write(arr.ctypes.data, shape, 2, out, need - 1) == -need
    assert out.raw == b"\xAA" * need
    length = write(arr.ctypes.data, shape, 2, out, need)
    assert out.raw[:length] == b"[[0.0,1.0,2.0],[3.0,4.0,5.0]]"
    assert capacity((ctypes.c_int64 * 2)(2, -1), 2) == EINVAL
    assert capacity((ctypes.c_int64 * 1)(1), 65) == EINVAL
    assert capacity((ctypes.c_int64 * 2)(1 << 40, 1 << 40), 2) == EINVAL
    assert write(arr.ctypes.data, (ctypes.c_int64 * 2)(2, -1), 2, out, need) == EINVAL


def test_longest_number_fits_the_response_bound():
    """responses.JSON_CHARS: 16 characters (the longest float32, over all 2^32) and a separator per element
    (regression: the bound was 16 with the separator, so a row of such numbers overran it)."""
    from posenc.http.api.codecs import json_data
    from posenc.http.api.responses import json_data_bound

    longest = f32([0xB5EDADAF])
    assert json_text.json_f32(longest) == orjson_text(longest) == b"[-0.0000017708425]"
    for shape in ((1000,), (10, 100), (2, 3, 50)):
        worst = np.full(shape, longest[0], np.float32)
        assert len(json_data(worst)) <= json_data_bound(worst)
        assert len(json_data(worst.astype(np.float16))) <= json_data_bound(worst.astype(np.float16))


def test_writer_follows_posenc_isa():
    """The AVX-512 writer runs where the kernels' path is AVX-512; POSENC_ISA=scalar or avx2 picks the scalar one."""
    code = "from posenc.native import json_text; print(json_text.writer())"
    found = {}
    for isa in ("scalar", "avx2", "avx512"):
        if isa not in native.available_isas():
            continue
        env = {k: v for k, v in os.environ.items() if k != "POSENC_ISA"}
        env["POSENC_ISA"] = isa
        result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                                check=True)
        found[isa] = result.stdout.strip()
    assert found.get("scalar") == "scalar" and found.get("avx2", "scalar") == "scalar"
    if "avx512" in found:
        avx512_writer = json_text.json_f32_by("avx512", np.zeros(1, np.float32)) is not None
        assert found["avx512"] == ("avx512" if avx512_writer else "scalar")


def test_tables_are_the_generators_output():
    spec = importlib.util.spec_from_file_location("gen_json_tables", ROOT / "native" / "tools" / "gen_json_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (ROOT / "native" / "src" / "json_tables.h").read_text() == module.header()
