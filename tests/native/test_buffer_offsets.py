"""Outputs at any address: every sin/cos kernel path (native scalar, AVX2, AVX-512 emulated by
SIMDe, native AVX-512, and the numba kernel) and every table function that takes `out` write
the same bytes into a buffer starting 0, 16, 32 or 48 bytes past a 64-byte line as into an
aligned one, and nothing outside it: small tables (ordinary stores) and tables of 16 MiB, past
the 8 MiB from which the native kernels stream their rows out through the L1 tile. numpy's own
big arrays start 16 bytes past a line, so that is the buffer users pass.

Speed at each offset (the AVX-512 path once took 8x as long at +16 bytes as aligned, with the
same bytes) is measured by `posenc bench tables`, not here: these tests hold the bytes. A view
that is not one C-contiguous run (strided, Fortran order), read-only, of another shape or dtype is
refused with PosencError naming `out`, on every path alike, before anything is written.
"""

import numpy as np
import posenc
import pytest
from posenc import native
from posenc.api._tables import constant_amplitude
from posenc.api.rope import rope_planned_rows, rope_rows_crc32c, rope_table
from posenc.api.sinusoidal import sinusoidal_rows_crc32c, sinusoidal_table
from posenc.encodings import SinusoidalSpec
from posenc.encodings.columns import ColumnPlan
from posenc.errors import PosencError
from posenc.kernels import set_threads, threads, trig
from posenc.shm import checksum

pytest_plugins = ["native_support"]

OFFSETS = (0, 16, 32, 48)  # bytes past a 64-byte boundary
STREAMED_BYTES = 16 << 20  # twice the kernels' streaming threshold (STREAM_MIN_BYTES, kernels_body.h)
SENTINEL = 0xAB
ROPE = posenc.RopeSpec(128, base=500000.0, scaling={"rope_type": "yarn", "factor": 4.0,  # amplitude 1.14
                                                     "original_max_position_embeddings": 8192})


def sinusoidal_job(dim: int, layout: str):
    spec = SinusoidalSpec(dim, layout=layout)
    return spec.freqs, constant_amplitude(spec.n_sin, spec.amplitude), lambda n: spec.column_plan()


def rope_rows_job():
    """rope_table's rows [cos | sin], n_freq of each."""
    inv, attention = ROPE.inv_freq()
    n_freq = inv.shape[0]
    plan = ColumnPlan(row_stride=2 * n_freq, sin_base=n_freq, cos_base=0, interleaved=False, n_cos=n_freq)
    return inv, constant_amplitude(n_freq, attention), lambda n: plan


def rope_pair_job():
    """rope_cos_sin's [2, n, n_freq] buffer: a cos block, then a sin block n rows further."""
    inv, attention = ROPE.inv_freq()
    n_freq = inv.shape[0]
    return inv, constant_amplitude(n_freq, attention), lambda n: ColumnPlan(
        row_stride=n_freq, sin_base=n * n_freq, cos_base=0, interleaved=False, n_cos=n_freq)


JOBS = {
    "sinusoidal interleaved": sinusoidal_job(128, "interleaved"),
    "sinusoidal interleaved, odd width": sinusoidal_job(131, "interleaved"),
    "sinusoidal halves [sin | cos]": sinusoidal_job(128, "halves"),
    "rope rows [cos | sin]": rope_rows_job(),
    "rope cos/sin blocks": rope_pair_job(),
}


def guarded(nbytes: int, dtype, offset: int) -> tuple[np.ndarray, np.ndarray]:
    """(raw, view): a 1-D `dtype` view of nbytes starting `offset` bytes past a 64-byte boundary
    inside `raw`, every byte of which holds SENTINEL."""
    raw = np.full(nbytes + 192, SENTINEL, np.uint8)
    start = (-raw.ctypes.data) % 64 + 64 + offset
    return raw, raw[start:start + nbytes].view(dtype)


def assert_only_view_written(raw: np.ndarray, view: np.ndarray) -> None:
    start = view.ctypes.data - raw.ctypes.data
    assert (raw[:start] == SENTINEL).all(), "bytes before the buffer were written"
    assert (raw[start + view.nbytes:] == SENTINEL).all(), "bytes after the buffer were written"


def row_counts(row_bytes: int) -> tuple[int, int]:
    """A small table (ordinary stores, a part of a tile) and one of 16 MiB (streamed)."""
    return 37, STREAMED_BYTES // row_bytes


def check_every_offset(write, name: str, dtype: str) -> None:
    """write(positions, freqs, amp, flat, plan) into an aligned buffer and at every offset: the same bytes."""
    freqs, amp, plan_for = JOBS[name]
    itemsize = np.dtype(dtype).itemsize
    width = freqs.shape[0] + plan_for(1).n_cos
    for n in row_counts(width * itemsize):
        plan = plan_for(n)
        positions = np.arange(-3.0, n - 3.0)
        size = n * width  # every job writes whole rows back to back
        expected = guarded(size * itemsize, dtype, 0)[1]
        write(positions, freqs, amp, expected, plan)
        for offset in OFFSETS:
            raw, flat = guarded(size * itemsize, dtype, offset)
            write(positions, freqs, amp, flat, plan)
            assert flat.tobytes() == expected.tobytes(), (name, dtype, n, offset)
            assert_only_view_written(raw, flat)


@pytest.mark.parametrize("name", list(JOBS))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_native_paths_write_the_same_bytes_at_every_offset(kernels, name, dtype):
    check_every_offset(lambda p, f, a, flat, plan: kernels.sincos_rows(p, f, a, flat, plan, 0, p.shape[0]),
                       name, dtype)


@pytest.mark.parametrize("name", ["sinusoidal interleaved", "sinusoidal halves [sin | cos]", "rope rows [cos | sin]"])
def test_the_one_pass_crc_kernel_writes_the_same_bytes_and_crc_at_every_offset(kernels, name):
    """sincos_rows_crc (the shm writer's rows and CRC-32C in one pass): the same rows wherever the
    buffer starts, and the standard CRC-32C of them (that they are sincos_rows' rows: test_sincos_crc)."""
    def write(positions, freqs, amp, flat, plan):
        crc = kernels.sincos_rows_crc(positions, freqs, amp, flat, plan, 0, positions.shape[0], 0)
        assert crc == checksum.crc32c(flat, native=False)

    check_every_offset(write, name, "float32")


@pytest.mark.parametrize("name", list(JOBS))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_numba_kernel_writes_the_same_bytes_at_every_offset(name, dtype):
    def write(positions, freqs, amp, flat, plan):
        trig.sincos_rows(positions, freqs, amp, flat, plan.row_stride, plan.sin_base, plan.cos_base,
                         plan.interleaved, plan.n_cos, 0, positions.shape[0])

    check_every_offset(write, name, dtype)


def test_native_kernels_refuse_a_buffer_that_is_not_one_run(kernels):
    freqs, amp, plan_for = JOBS["sinusoidal interleaved"]
    strided = np.zeros(2 * 4 * 128, np.float32)[::2]
    with pytest.raises(PosencError) as refused:
        kernels.sincos_rows(np.arange(4.0), freqs, amp, strided, plan_for(4), 0, 4)
    assert refused.value.field == "out" and not strided.any()


# The table functions, on this process's kernel path (posenc.kernels.active), on one thread and
# on three (each thread's rows then start at another offset too).

TABLES = {
    "rope_table": (lambda n: (n, 128), lambda p, dtype, out: rope_table(p, ROPE, dtype=dtype.name, out=out)),
    "sinusoidal interleaved": (lambda n: (n, 128), lambda p, dtype, out: sinusoidal_table(
        p, SinusoidalSpec(128), dtype, out)),
    "sinusoidal halves": (lambda n: (n, 96), lambda p, dtype, out: sinusoidal_table(
        p, SinusoidalSpec(96, layout="halves"), dtype, out)),
    "sinusoidal t2t, odd dim": (lambda n: (n, 129), lambda p, dtype, out: sinusoidal_table(
        p, SinusoidalSpec(129, layout="t2t"), dtype, out)),
    "rope planned rows (a computed table's)": (lambda n: (n, 128), lambda p, dtype, out: rope_planned_rows(
        ROPE, None, dtype)(p, out)),
}


@pytest.fixture(params=[1, 3], ids=["1 thread", "3 threads"])
def n_threads(request):
    previous = threads()
    set_threads(request.param)
    yield request.param
    set_threads(previous)


@pytest.mark.parametrize("name", list(TABLES))
@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float64)])
def test_tables_into_out_at_every_offset_equal_new_arrays(name, dtype, n_threads):
    shape_for, table = TABLES[name]
    for n in row_counts(shape_for(1)[1] * dtype.itemsize):
        positions = np.arange(n, dtype=np.float64) + 0.25 * (n < 100)  # small: fractional positions too
        expected = table(positions, dtype, None)
        for offset in OFFSETS:
            raw, flat = guarded(expected.nbytes, dtype, offset)
            out = flat.reshape(shape_for(n))
            assert table(positions, dtype, out) is out
            assert out.tobytes() == expected.tobytes(), (name, dtype, n, offset)
            assert_only_view_written(raw, flat)


@pytest.mark.skipif(native.ACTIVE is None, reason=f"the one-pass CRC kernel is native: {native.STATUS}")
def test_table_rows_with_their_crc_at_every_offset():
    """The shm writer's one pass (rows and CRC-32C) into a block at each offset, streamed size."""
    n = STREAMED_BYTES // (128 * 4)
    positions = np.arange(n, dtype=np.float64)
    f32 = np.dtype(np.float32)
    for name, rows, expected in (
            ("rope", lambda out: rope_rows_crc32c(positions, ROPE, None, out, 0), rope_table(positions, ROPE)),
            ("sinusoidal", lambda out: sinusoidal_rows_crc32c(positions, SinusoidalSpec(128), out, 0),
             sinusoidal_table(positions, SinusoidalSpec(128), f32))):
        for offset in OFFSETS:
            raw, flat = guarded(expected.nbytes, f32, offset)
            crc = rows(flat.reshape(expected.shape))
            assert flat.tobytes() == expected.tobytes(), (name, offset)
            assert crc == checksum.crc32c(expected, native=False), (name, offset)
            assert_only_view_written(raw, flat)


def refused_outs(n: int, width: int, dtype) -> dict[str, np.ndarray]:
    """Buffers rope_table / sinusoidal_table must not write into, each filled with NaN."""
    base = np.full((2 * n, 2 * width), np.nan, dtype)
    read_only = np.full((n, width), np.nan, dtype)
    read_only.flags.writeable = False
    return {
        "every other column": base[:n, ::2],  # numpy flattens it in place as one strided run
        "every other row": base[::2, :width],  # numpy flattens it into a copy
        "Fortran order": np.asfortranarray(np.full((n, width), np.nan, dtype)),
        "read-only": read_only,
        "too few rows": np.full((n - 1, width), np.nan, dtype),
        "too narrow": np.full((n, width - 2), np.nan, dtype),
        "another dtype": np.full((n, width), np.nan, np.float64 if dtype == np.float32 else np.float32),
    }


@pytest.mark.parametrize("name", list(TABLES))
@pytest.mark.parametrize("n", [37, 20000])
def test_buffers_that_are_not_the_rows_are_refused_naming_out(name, n):
    """Before: the native binding refused them with a ValueError naming `flat`, while numba filled
    a strided copy (the caller's array left as it was) and wrote a short buffer past its end."""
    shape_for, table = TABLES[name]
    f32 = np.dtype(np.float32)
    for what, out in refused_outs(n, shape_for(n)[1], f32).items():
        with pytest.raises(PosencError, match="^out: ") as refused:
            table(np.arange(n, dtype=np.float64), f32, out)
        assert refused.value.field == "out", what
        assert np.isnan(out).all(), f"{what}: written before it was refused"
    with pytest.raises(PosencError, match="^out: must be a numpy array"):
        table(np.arange(3.0), f32, [[0.0] * shape_for(3)[1]] * 3)


def test_a_float16_table_takes_its_kernel_dtype_buffer():
    """Half types are computed in float64 and cast once: `out` is that float64 buffer, the
    float16 result a new array made from it."""
    positions = np.arange(50.0)
    out = np.empty((50, 128))
    result = rope_table(positions, ROPE, dtype="float16", out=out)
    assert result.dtype == np.float16 and result.tobytes() == rope_table(positions, ROPE, dtype="float16").tobytes()
    assert out.tobytes() == rope_table(positions, ROPE, dtype="float64").tobytes()
