"""sincos_rows_crc, the sin/cos kernel that checksums its rows as it writes them, on every
native path (scalar, AVX2, AVX-512 via SIMDe, native AVX-512): the rows are sincos_rows'
bit for bit, and the CRC is the standard CRC-32C of their bytes (numba's slice-by-8 loop,
independent of the native code), for every dense layout (interleaved, odd widths, [sin | cos]
and RoPE's [cos | sin]), both dtypes, row counts around the 8 KiB tile and past the 8 MiB
from which rows are streamed, outputs at every alignment the streaming paths distinguish
(64, 16 and 4 bytes), and a CRC continued from a seed. Layouts with gaps are refused."""

import ctypes

import numpy as np
import pytest

from posenc import native
from posenc.encodings import SinusoidalSpec
from posenc.encodings.columns import ColumnPlan
from posenc.errors import PosencError
from posenc.native.library import EINVAL, Layout, plan_is_dense
from posenc.shm import checksum

pytest_plugins = ["native_support"]

STREAM_MIN_BYTES = 8 << 20  # kernels_body.h: outputs this big are streamed (tiles, then copied out)


def sinusoidal_job(dim: int, layout: str):
    spec = SinusoidalSpec(dim, layout=layout)
    return spec.freqs, np.full(spec.n_sin, spec.amplitude), spec.column_plan()


def rope_job(n_freq: int):
    """RoPE tables' rows: [cos | sin], n_freq of each, the attention factor as amplitude."""
    freqs = 10000.0 ** (-np.arange(n_freq) / n_freq)
    plan = ColumnPlan(row_stride=2 * n_freq, sin_base=n_freq, cos_base=0, interleaved=False, n_cos=n_freq)
    return freqs, np.full(n_freq, 1.25), plan


JOBS = {
    "interleaved": sinusoidal_job(128, "interleaved"),
    "interleaved, odd width": sinusoidal_job(33, "interleaved"),
    "halves [sin | cos]": sinusoidal_job(130, "halves"),
    "t2t, even": sinusoidal_job(40, "t2t"),
    "rope [cos | sin]": rope_job(24),
}


def aligned_view(nbytes: int, dtype, misalign: int) -> np.ndarray:
    """A 1-D `dtype` array of nbytes whose data starts `misalign` bytes past a 64-byte boundary."""
    raw = np.full(nbytes + 128, 0xAB, np.uint8)
    start = (-raw.ctypes.data) % 64 + misalign
    return raw[start:start + nbytes].view(dtype)


def check_one_pass(kernels, positions, job, dtype, misalign=0, seed=0):
    freqs, amp, plan = job
    n, itemsize = positions.shape[0], np.dtype(dtype).itemsize
    expected = np.empty(n * plan.row_stride, dtype)
    kernels.sincos_rows(positions, freqs, amp, expected, plan, 0, n)
    out = aligned_view(expected.nbytes, dtype, misalign)
    crc = kernels.sincos_rows_crc(positions, freqs, amp, out, plan, 0, n, seed)
    assert out.tobytes() == expected.tobytes(), "the rows differ from sincos_rows'"
    assert crc == checksum.crc32c(out, seed, native=False), (n, itemsize, misalign)
    return crc


@pytest.mark.parametrize("name", list(JOBS))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_rows_and_crc_for_row_counts_around_the_tile(kernels, name, dtype):
    job = JOBS[name]
    row_bytes = job[2].row_stride * np.dtype(dtype).itemsize
    per_tile = max(1, 8192 // row_bytes)
    for n in sorted({1, 2, per_tile - 1, per_tile, per_tile + 1, 3 * per_tile + 5}):
        positions = np.arange(1000.0, 1000.0 + n)
        for seed in (0, 0xDEADBEEF):
            check_one_pass(kernels, positions, job, dtype, misalign=4 if dtype == "float32" else 0, seed=seed)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_rows_that_are_not_a_run_of_integers(kernels, dtype):
    """Fractional, negative, huge and repeated positions (the direct path, anchors that change
    mid-tile): the checksum covers what was written, whatever the path each row took."""
    rng = np.random.default_rng(5)
    positions = np.concatenate([rng.uniform(-5e4, 5e4, 300), np.arange(-20.0, 20.0), [2.0**60, 3.5, 3.5, 0.0],
                                rng.integers(0, 2**40, 100).astype(np.float64)])
    for job in JOBS.values():
        check_one_pass(kernels, positions, job, dtype, seed=7)


@pytest.mark.parametrize("name, dtype", [("interleaved", "float32"), ("rope [cos | sin]", "float64"),
                                         ("halves [sin | cos]", "float32")])
def test_streamed_outputs_at_every_alignment(kernels, name, dtype):
    """Past 8 MiB the rows are built in an L1 tile, checksummed, then streamed out (16-byte
    stores up to a 64-byte boundary, whole lines after it, on AVX-512); outputs that are not
    16-byte aligned are written with ordinary stores. Every case: the same rows and CRC."""
    job = JOBS[name]
    row_bytes = job[2].row_stride * np.dtype(dtype).itemsize
    n = STREAM_MIN_BYTES // row_bytes + 7
    positions = np.arange(-3.0, n - 3.0)
    crcs = {misalign: check_one_pass(kernels, positions, job, dtype, misalign) for misalign in (0, 16, 48, 4)}
    assert len(set(crcs.values())) == 1


def test_the_crc_chains_across_calls(kernels):
    """Rows computed in pieces, each call continuing the CRC the last returned, checksum as one run."""
    freqs, amp, plan = JOBS["interleaved"]
    positions = np.arange(5000.0)
    whole = np.empty(5000 * plan.row_stride, np.float32)
    crc = 0
    for lo, hi in ((0, 1), (1, 1700), (1700, 1700), (1700, 5000)):
        crc = kernels.sincos_rows_crc(positions, freqs, amp, whole, plan, lo, hi, crc)
    assert crc == checksum.crc32c(whole, native=False)


def test_layouts_with_gaps_are_refused(kernels):
    freqs, amp, _ = JOBS["interleaved"]
    out = np.full(10 * 200, np.nan, np.float32)
    gaps = [ColumnPlan(row_stride=200, sin_base=0, cos_base=1, interleaved=True, n_cos=64),  # padded rows
            ColumnPlan(row_stride=128, sin_base=0, cos_base=64, interleaved=True, n_cos=32),  # lone sins spread out
            ColumnPlan(row_stride=128, sin_base=64, cos_base=64 * 10, interleaved=False, n_cos=64)]  # a second block
    for plan in gaps:
        assert not plan_is_dense(plan, freqs.shape[0])
        with pytest.raises(PosencError, match="whole, back-to-back rows") as raised:
            kernels.sincos_rows_crc(np.arange(10.0), freqs, amp, out, plan, 0, 10, 0)
        assert raised.value.field == "plan"
    assert np.isnan(out).all()


@pytest.mark.skipif(native.ACTIVE is None, reason=f"native library unavailable: {native.STATUS}")
def test_the_c_entry_point_checks_what_python_checks():
    """posenc_sincos_rows_crc (the active path): the same CRC, EINVAL for a NULL crc or a layout
    with gaps, and nothing written then."""
    lib = native.LIBRARY
    freqs, amp, plan = JOBS["interleaved"]
    positions = np.arange(40.0)
    out = np.full(40 * 128, np.nan, np.float32)
    args = [positions.ctypes.data, 40, freqs.ctypes.data, amp.ctypes.data, freqs.shape[0]]
    crc = ctypes.c_uint32(0)
    dense = Layout(plan.row_stride, plan.sin_base, plan.cos_base, plan.n_cos, 1, 0)
    gappy = Layout(130, 0, 1, plan.n_cos, 1, 0)
    assert lib.posenc_sincos_rows_crc(*args, ctypes.byref(gappy), out.ctypes.data, 0, ctypes.byref(crc)) == EINVAL
    assert lib.posenc_sincos_rows_crc(*args, ctypes.byref(dense), out.ctypes.data, 0, None) == EINVAL
    assert np.isnan(out).all() and crc.value == 0
    assert lib.posenc_sincos_rows_crc(*args, ctypes.byref(dense), out.ctypes.data, 0, ctypes.byref(crc)) == 0
    assert crc.value == checksum.crc32c(out, native=False)
