"""Sinusoidal tables: oracle agreement on every layout, odd dims, fractional and huge positions."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import posenc
from posenc import reference
from conftest import DTYPES, assert_matches_oracle

LAYOUTS = ["interleaved", "halves", "t2t"]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dim", [1, 2, 3, 7, 64, 128, 129])
def test_contiguous_range_matches_oracle(layout, dim):
    pos = np.arange(5000)
    assert_matches_oracle(posenc.sinusoidal(pos, dim, layout=layout), reference.sinusoidal(pos, dim, layout=layout),
                          "float32")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_large_and_fractional_positions_every_dtype(dtype, layout):
    rng = np.random.default_rng(1)
    pos = np.concatenate([
        [0, 2**24, 2**24 - 1, 2**24 - 0.5],
        2**24 - 300 + np.arange(300),  # a contiguous run near the top: recurrence path
        rng.uniform(0, 2**24, 500),  # arbitrary fractional positions: anchored path
        np.arange(100) * 0.25 + 1e6,  # a fractional-step run
    ])
    out = posenc.sinusoidal(pos, 96, layout=layout, dtype=dtype)
    assert out.dtype == np.dtype(posenc.api.rope.OUTPUT_DTYPES[dtype])
    assert_matches_oracle(out, reference.sinusoidal(pos, 96, layout=layout), dtype, angle_max=2.0**24)


@given(
    positions=st.lists(st.floats(-2**24, 2**24, allow_nan=False), min_size=1, max_size=40),
    dim=st.integers(1, 70),
    layout=st.sampled_from(LAYOUTS),
    base=st.floats(2.0, 1e6),
)
def test_random_positions_match_oracle(positions, dim, layout, base):
    pos = np.array(positions)
    expected = reference.sinusoidal(pos, dim, base=base, layout=layout)
    assert_matches_oracle(posenc.sinusoidal(pos, dim, base=base, layout=layout), expected, "float32")
    assert_matches_oracle(posenc.sinusoidal(pos, dim, base=base, layout=layout, dtype="float64"), expected,
                          "float64", angle_max=2.0**24)


def test_reference_layouts_spelled_out():
    """The three layouts on a 5-dim row at position 3, from the formulas in docs/formulas.md section 5."""
    p, d = 3.0, 5
    w = [10000 ** (-2 * i / d) for i in range(3)]
    inter = posenc.sinusoidal([p], d, dtype="float64")[0]
    assert inter == pytest.approx([math.sin(p * w[0]), math.cos(p * w[0]), math.sin(p * w[1]), math.cos(p * w[1]),
                                   math.sin(p * w[2])], abs=1e-15)
    halves = posenc.sinusoidal([p], d, layout="halves", dtype="float64")[0]
    assert halves == pytest.approx([math.sin(p * w[0]), math.sin(p * w[1]), math.sin(p * w[2]),
                                    math.cos(p * w[0]), math.cos(p * w[1])], abs=1e-15)
    t2t = posenc.sinusoidal([p], d, layout="t2t", dtype="float64")[0]
    w2 = [1.0, 1e-4]  # d//2 = 2 timescales: exactly 1 and 1/max_timescale
    assert t2t == pytest.approx([math.sin(p * w2[0]), math.sin(p * w2[1]), math.cos(p * w2[0]),
                                 math.cos(p * w2[1]), 0.0], abs=1e-15)


def test_t2t_timescales_and_whisper_form():
    """min/max timescale as tensor2tensor: min_timescale multiplies the *inverse* timescales
    (docs/formulas.md), so the last frequency is min_ts * (min_ts / max_ts), not 1/max_ts."""
    pos = np.arange(10.0)
    ours = posenc.sinusoidal(pos, 8, layout="t2t", min_timescale=2.0, max_timescale=500.0, dtype="float64")
    inv = 2.0 * np.exp(-np.arange(4) * math.log(500.0 / 2.0) / 3)
    assert inv[-1] == pytest.approx(2.0 * (2.0 / 500.0))
    np.testing.assert_allclose(ours, np.concatenate([np.sin(pos[:, None] * inv), np.cos(pos[:, None] * inv)], 1),
                               atol=1e-15)


@given(p=st.floats(0, 1e6), k=st.integers(1, 5000), dim=st.integers(1, 32).map(lambda n: 2 * n))
def test_shift_is_a_fixed_rotation(p, k, dim):
    """PE(p+k) is PE(p) rotated pairwise by angles k*w_i that do not depend on p."""
    a, b = posenc.sinusoidal([p, p + k], dim, dtype="float64")
    w = 10000.0 ** (-2 * np.arange(dim // 2) / dim)
    s, c = a[0::2], a[1::2]
    rotated_sin = s * np.cos(k * w) + c * np.sin(k * w)
    rotated_cos = c * np.cos(k * w) - s * np.sin(k * w)
    np.testing.assert_allclose(b[0::2], rotated_sin, atol=1e-8)
    np.testing.assert_allclose(b[1::2], rotated_cos, atol=1e-8)


def test_scale_and_target_std():
    pos = np.arange(20000)
    scale = np.linspace(0.5, 2.0, 64)
    scaled = posenc.sinusoidal(pos, 64, scale=scale, dtype="float64")
    assert_matches_oracle(scaled, reference.sinusoidal(pos, 64) * scale, "float64", amplitude=2.0, angle_max=2e4)
    normed = posenc.sinusoidal(pos, 64, target_std=0.02)
    assert normed.std() == pytest.approx(0.02, rel=0.05)
    # a constant factor: the same row from a different request is identical
    np.testing.assert_array_equal(posenc.sinusoidal([777], 64, target_std=0.02)[0], normed[777])


def test_spec_identity_is_canonical():
    a = posenc.SinusoidalSpec(128, base=10000)
    b = posenc.SinusoidalSpec(128, base=10000.0, layout="interleaved")
    assert a.canonical_json == b.canonical_json and a.hash == b.hash
    assert a.hash != posenc.SinusoidalSpec(128, layout="halves").hash
    assert posenc.SinusoidalSpec.from_dict(a.to_dict()) == a


def test_parallel_chunks_agree_with_oracle():
    """Big jobs are split over threads; every chunk re-anchors, so the split cannot be seen."""
    pos = np.arange(40000) + 0.5
    previous = posenc.kernels.threads()
    posenc.kernels.set_threads(5)
    try:
        out = posenc.sinusoidal(pos, 64, layout="halves")
    finally:
        posenc.kernels.set_threads(previous)
    assert_matches_oracle(out, reference.sinusoidal(pos, 64, layout="halves"), "float32")


def test_offset_shifts_positions_everywhere():
    """M2M100 reads row p + padding_idx + 1: the spec's offset is a shift of the positions, the same
    in the function, in `sinusoidal_table` (HTTP) and in a published table's rows."""
    from posenc.tables import TableSpec

    pos = np.arange(0, 300)
    expected = posenc.sinusoidal(pos + 2, 64, layout="t2t", dtype="float64")
    np.testing.assert_array_equal(posenc.sinusoidal(pos, 64, layout="t2t", offset=2, dtype="float64"), expected)
    table = TableSpec(posenc.SinusoidalSpec(64, layout="t2t", offset=2), 0, 300, dtype="float64")
    rows = np.empty(table.shape)
    table.fill(rows)
    np.testing.assert_array_equal(rows, expected)
    assert "offset" not in posenc.SinusoidalSpec(64).to_dict()  # unshifted specs keep their hash
    shifted = posenc.SinusoidalSpec(64, offset=2)
    assert shifted.hash != posenc.SinusoidalSpec(64).hash and posenc.SinusoidalSpec.from_dict(shifted.to_dict()) == shifted


@pytest.mark.parametrize("offset", [-1, 1.5, "2", True, None, 2**54])
def test_bad_offset_names_the_field(offset):
    with pytest.raises(posenc.PosencError) as info:
        posenc.SinusoidalSpec(64, offset=offset)
    assert info.value.field == "offset"


def test_offset_cannot_push_past_the_position_limit():
    with pytest.raises(posenc.PosencError) as info:
        posenc.sinusoidal([posenc.LIMITS.max_abs_position], 8, offset=2)
    assert info.value.field == "positions"
