"""Every native code path (scalar, AVX2, AVX-512 via SIMDe, native AVX-512) against golden
values and the float64 oracle: sin/cos tables in every layout, RoPE rotation, ALiBi, gathers."""

import json
from pathlib import Path

import numpy as np
import pytest

from posenc import reference
from posenc.errors import PosencError
from posenc.encodings import RopeSpec, SinusoidalSpec
from posenc.encodings.columns import ColumnPlan
from conftest import assert_matches_oracle

pytest_plugins = ["native_support"]

GOLDEN = json.loads((Path(__file__).with_name("golden_sincos.json")).read_text())["cases"]
LAYOUTS = ["interleaved", "halves", "t2t"]
DTYPES = ["float32", "float64"]
PAIR_PLAN = ColumnPlan(row_stride=2, sin_base=0, cos_base=1, interleaved=True, n_cos=1)
# slack for the reduction's absolute error (vsincos.h: below 2^-90; 2^-70 is far above it)
REDUCTION_ERROR = 2.0**-70


def sinusoidal_rows(kernels, positions, spec: SinusoidalSpec, dtype) -> np.ndarray:
    """The kernel's table for `spec`; cells the layout does not write stay NaN (then checked)."""
    out = np.full((positions.shape[0], spec.dim), np.nan, dtype=dtype)
    kernels.sincos_rows(positions, spec.freqs, np.full(spec.n_sin, spec.amplitude), out.reshape(-1),
                        spec.column_plan(), 0, positions.shape[0])
    if spec.layout == "t2t" and spec.dim % 2:
        assert np.isnan(out[:, -1]).all(), "the t2t pad column must be left alone"
        out[:, -1] = 0.0
    assert not np.isnan(out).any()
    return out


def check_sinusoidal(kernels, positions, dim, layout, dtype, base=10000.0):
    spec = SinusoidalSpec(dim, base=base, layout=layout)
    angle_max = float(np.abs(positions).max() * spec.freqs.max()) if spec.freqs.size else 0.0
    assert_matches_oracle(sinusoidal_rows(kernels, positions, spec, dtype),
                          reference.sinusoidal(positions, dim, base=base, layout=layout), dtype, angle_max=angle_max)


def golden_case(case) -> tuple[float, float, np.ndarray]:
    p, w = float.fromhex(case["position"]), float.fromhex(case["freq"])
    return p, w, np.array([float(case["sin"]), float(case["cos"])])


def pair_row(kernels, p: float, w: float, dtype) -> np.ndarray:
    out = np.empty(2, dtype=dtype)
    kernels.sincos_rows(np.array([p]), np.array([w]), np.ones(1), out, PAIR_PLAN, 0, 1)
    return out


def test_golden_sin_cos_of_hard_angles_direct(kernels):
    """The sincos itself (the direct path: a fractional position whose angle is the golden
    x = fl(p*w) exactly): near multiples of pi/2, quadrant edges, 2^24, 2^27, 2^31, libm
    angles, to 2 ulp of the value."""
    for case in GOLDEN:
        p, w, expected = golden_case(case)
        x = p * w
        # integer angles go through the position x*2^-60 (fractional, exact) and frequency 2^60
        position, freq = (x, 1.0) if x != np.floor(x) else (x * 2.0**-60, 2.0**60)
        for dtype in DTYPES:
            out = pair_row(kernels, position, freq, dtype)
            if dtype == "float64":
                tolerance = 2 * np.spacing(np.abs(expected)) + REDUCTION_ERROR
                assert (np.abs(out - expected) <= tolerance).all(), (case, out.tolist())
            else:
                assert_matches_oracle(out, expected, dtype)


def test_golden_sin_cos_of_hard_angles_split(kernels):
    """The same (p, w) as given, against sin/cos of the exact product p*w (the kernels never
    round it): integer p takes the angle addition of its absolute parts, each part's sincos
    within 1 ulp, so the float64 error is a few 2^-53 at any angle (9 * 2^-53 proven, see
    tests/test_exact_angles.py)."""
    for case in GOLDEN:
        p, w = float.fromhex(case["position"]), float.fromhex(case["freq"])
        expected = np.array([float(case["sin_exact"]), float(case["cos_exact"])])
        for dtype in DTYPES:
            out = pair_row(kernels, p, w, dtype)
            if dtype == "float64":
                assert (np.abs(out - expected) <= 9 * 2.0**-53).all(), (case, out.tolist())
            else:
                assert_matches_oracle(out, expected, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_contiguous_ranges_every_layout_and_width(kernels, layout, dtype):
    """Recurrence path across re-anchors (rows 1024, 2048), odd widths, vector tails."""
    for dim in (1, 2, 3, 8, 9, 17, 64, 129):
        check_sinusoidal(kernels, np.arange(2500, dtype=np.float64), dim, layout, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_fractional_large_and_shuffled_positions(kernels, dtype):
    rng = np.random.default_rng(5)
    top = 2.0**24
    cases = {
        "fractional run near 2^24": top - 2000 + 0.25 * np.arange(3000),
        "integer run ending at 2^24": top - 1500 + np.arange(1501.0),
        "arbitrary fractional": rng.uniform(-top, top, 700),
        "broken runs": np.concatenate([np.arange(10.0), np.arange(10.0, 40.0, 3.0), [7.5, 7.5, 1e6], np.arange(5.0)]),
    }
    for positions in cases.values():
        for layout in LAYOUTS:
            check_sinusoidal(kernels, positions, 72, layout, dtype)


def test_randomised_specs_against_oracle(kernels):
    """Seeded random widths, bases, layouts, dtypes and position mixes."""
    rng = np.random.default_rng(11)
    for _ in range(25):
        n = int(rng.integers(1, 300))
        start = float(rng.uniform(-2.0**24, 2.0**24 - 300 * 4))
        step = float(rng.choice([1.0, 0.5, 3.0, 0.1]))
        positions = start + step * np.arange(n)
        if rng.random() < 0.5:
            positions = rng.permutation(positions)
        check_sinusoidal(kernels, positions, int(rng.integers(1, 160)), str(rng.choice(LAYOUTS)),
                         str(rng.choice(DTYPES)), base=float(rng.uniform(2.0, 1e6)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_rope_cos_sin_pair_layout_with_attention_factor(kernels, dtype):
    """RoPE's [2, n, n_freq] cos/sin buffer: blocks layout with sin_base in the second block."""
    inv, _ = RopeSpec(128, base=500000.0).inv_freq()
    positions = np.concatenate([np.arange(1100.0), [131071.5, 3.25, 2.0**24]])
    n, n_freq, attention = positions.shape[0], inv.shape[0], 1.2
    buf = np.full((2, n, n_freq), np.nan, dtype=dtype)
    plan = ColumnPlan(row_stride=n_freq, sin_base=n * n_freq, cos_base=0, interleaved=False, n_cos=n_freq)
    kernels.sincos_rows(positions, inv, np.full(n_freq, attention), buf.reshape(-1), plan, 0, n)
    cos, sin = reference.rope_cos_sin(positions, inv, attention)
    assert_matches_oracle(buf[0], cos, dtype, amplitude=attention, angle_max=2.0**24)
    assert_matches_oracle(buf[1], sin, dtype, amplitude=attention, angle_max=2.0**24)


def test_row_ranges_compose(kernels):
    """Rows lo..hi computed separately (as run_rows splits jobs) equal one call."""
    spec = SinusoidalSpec(40, layout="halves")
    positions = np.arange(3000.0)
    whole = sinusoidal_rows(kernels, positions, spec, "float32")
    parts = np.full_like(whole, np.nan)
    for lo, hi in [(0, 700), (700, 701), (701, 3000)]:
        kernels.sincos_rows(positions, spec.freqs, np.ones(spec.n_sin), parts.reshape(-1), spec.column_plan(), lo, hi)
    assert_matches_oracle(parts, whole.astype(np.float64), "float32")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["interleaved", "halves", "rope pair"])
def test_huge_outputs_stream_with_the_same_values(kernels, layout, dtype):
    """Past 8 MiB per call the kernels switch to non-temporal stores: direct for rows written
    front to back, through an L1 tile for RoPE's far-apart cos/sin blocks; misaligned outputs
    fall back to ordinary stores. Values must not change."""
    rows = (8 << 20) // (128 * np.dtype(dtype).itemsize) + 37  # not a whole number of tiles
    positions = 2.0**24 - rows + np.arange(rows, dtype=np.float64)
    if layout == "rope pair":
        freqs = SinusoidalSpec(128, layout="halves").freqs
        plan = ColumnPlan(row_stride=64, sin_base=rows * 64, cos_base=0, interleaved=False, n_cos=64)
        cos, sin = reference.rope_cos_sin(positions, freqs)
        expected = np.stack([cos, sin])
    else:
        spec = SinusoidalSpec(128, layout=layout)
        freqs, plan = spec.freqs, spec.column_plan()
        expected = reference.sinusoidal(positions, 128, layout=layout)
    for offset in (0, 1):  # 1: 4 or 8 bytes off 16-byte alignment
        backing = np.full(expected.size + offset, np.nan, dtype=dtype)
        out = backing[offset:]
        kernels.sincos_rows(positions, freqs, np.ones(64), out, plan, 0, rows)
        assert_matches_oracle(out.reshape(expected.shape), expected, dtype, angle_max=2.0**24)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("order", ["cos first", "sin first"])
def test_streamed_block_rows_are_bit_identical_at_every_cache_line_offset(kernels, order, dtype):
    """Whole [cos | sin] rows (rope_table's layout) and [sin | cos] rows past 8 MiB: on AVX2 they
    are built in an L1 tile and streamed out in one run from wherever the output starts (numpy's
    big arrays start 16 bytes past a cache line); every start gives the bits of the same rows
    written with ordinary stores (chunks under 8 MiB) and fractional positions (direct sincos)
    mixed in."""
    n_freq = 64
    row_bytes = 2 * n_freq * np.dtype(dtype).itemsize
    rows = (8 << 20) // row_bytes + 37  # not a whole number of tiles
    positions = np.arange(rows, dtype=np.float64) + 5000.0
    positions[::97] += 0.25
    freqs = 1.0 / 500000.0 ** (np.arange(n_freq) / n_freq)
    amp = np.full(n_freq, 0.75)
    plan = ColumnPlan(row_stride=2 * n_freq, sin_base=n_freq if order == "cos first" else 0,
                      cos_base=0 if order == "cos first" else n_freq, interleaved=False, n_cos=n_freq)
    expected = np.empty(rows * 2 * n_freq, dtype=dtype)
    for lo in range(0, rows, 4096):  # 4096 rows: 2-4 MiB, below the streaming threshold
        kernels.sincos_rows(positions, freqs, amp, expected, plan, lo, min(rows, lo + 4096))
    raw = np.empty(expected.nbytes + 128, np.uint8)
    for offset in (0, 16, 32, 48):
        start = (-raw.ctypes.data) % 64 + offset
        out = raw[start:start + expected.nbytes].view(dtype)
        out[:] = np.nan
        kernels.sincos_rows(positions, freqs, amp, out, plan, 0, rows)
        assert out.tobytes() == expected.tobytes(), offset


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_rope_rotation_full_and_partial(kernels, layout, dtype):
    rng = np.random.default_rng(3)
    for head_dim, n_freq in [(64, 32), (64, 16), (40, 13), (6, 3), (8, 0)]:
        x = rng.standard_normal((3, 37, head_dim)).astype(dtype)
        positions = rng.uniform(0, 2.0**20, 37)
        inv = 1.0 / 10000.0 ** (np.arange(n_freq) / max(n_freq, 1))
        cos, sin = reference.rope_cos_sin(positions, inv)
        expected = reference.rope_apply(x, cos, sin, layout)
        out = np.full_like(x, np.nan)
        kernels.rope_rotate_rows(x, cos, sin, layout == "interleaved", out, 0, 37)
        assert_matches_oracle(out, expected, dtype, amplitude=2 * float(np.abs(x).max()))
        kernels.rope_rotate_rows(x, cos, sin, layout == "interleaved", x, 0, 37)  # in place
        np.testing.assert_array_equal(x, out)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["causal", "symmetric", "bloom"])
def test_alibi_bias_bit_exact(kernels, mode, dtype):
    """Same float64 formula as the oracle, rounded once: equal bit for bit (incl. -inf)."""
    from posenc.kernels.alibi import MODES

    slopes = reference.alibi_slopes(12)
    for q_len, k_len, q_off, k_off in [(7, 13, 100, 95), (1, 1, 0, 0), (33, 64, -5, 0)]:
        q_pos = np.arange(q_off, q_off + q_len, dtype=np.float64)
        k_pos = np.arange(k_off, k_off + k_len, dtype=np.float64)
        out = np.full((12, q_len, k_len), np.nan, dtype=dtype)
        kernels.alibi_bias_rows(slopes, q_pos, k_pos, MODES[mode], out, 0, q_len)
        np.testing.assert_array_equal(out, reference.alibi_bias(slopes, q_pos, k_pos, mode).astype(dtype))


def test_alibi_huge_block_streams(kernels):
    from posenc.kernels.alibi import MODES

    slopes = reference.alibi_slopes(4)
    positions = np.arange(1024, dtype=np.float64)
    out = np.empty((4, 1024, 1024), dtype=np.float32)  # 16 MiB: non-temporal stores
    kernels.alibi_bias_rows(slopes, positions, positions, MODES["causal"], out, 0, 1024)
    np.testing.assert_array_equal(out, reference.alibi_bias(slopes, positions, positions).astype(np.float32))


@pytest.mark.parametrize("width, dtype", [(37, np.float32), (128, np.float64), (3, np.float16)])
def test_gather_rows(kernels, width, dtype):
    rng = np.random.default_rng(width)
    table = rng.standard_normal((500, width)).astype(dtype)
    rows = rng.integers(0, 500, 300)
    rows[:3] = [0, 499, 0]
    out = np.empty((300, width), dtype=dtype)
    kernels.gather_rows(table, rows, out, 0, 300)
    np.testing.assert_array_equal(out, table[rows])


def test_gather_refuses_rows_outside_the_table(kernels):
    table = np.zeros((10, 4), dtype=np.float32)
    out = np.full((3, 4), 7.0, dtype=np.float32)
    for bad in (10, -1):
        with pytest.raises(PosencError, match="rows") as excinfo:
            kernels.gather_rows(table, np.array([1, bad, 2]), out, 0, 3)
        assert str(bad) in str(excinfo.value)
        assert (out == 7.0).all(), "nothing is written when any index is bad"


def test_kernels_refuse_wrong_dtypes_and_short_buffers(kernels):
    spec = SinusoidalSpec(8)
    with pytest.raises(PosencError, match="out"):
        kernels.sincos_rows(np.arange(3.0), spec.freqs, np.ones(4), np.empty(24, np.float16), spec.column_plan(), 0, 3)
    with pytest.raises(PosencError, match="out"):  # too small for the rows asked for
        kernels.sincos_rows(np.arange(3.0), spec.freqs, np.ones(4), np.empty(23, np.float32), spec.column_plan(), 0, 3)
    with pytest.raises(PosencError, match="positions"):  # the C code reads float64
        kernels.sincos_rows(np.arange(3, dtype=np.float32), spec.freqs, np.ones(4), np.empty(24, np.float32),
                            spec.column_plan(), 0, 3)
