"""Batch invariance across kernel paths: the numba kernels and every native path (scalar, AVX2,
AVX-512 emulated by SIMDe, native AVX-512) compute each value as a pure function of
(position, frequency, amplitude), bit for bit, whatever else is in the call.

The reference for every row is numba with the row alone; a path passes only if each row of a
mixed batch (contiguous runs across the 16/1024 split boundaries, shuffled integers, fractional
neighbours, +-2^31, angles past vsincos.h's 2^45 and 2^62 steps in some lanes) equals it exactly."""

import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from posenc import kernels as nb_kernels
from posenc.encodings import RopeSpec, SinusoidalSpec
from posenc.encodings.columns import ColumnPlan
from posenc.kernels import trig
from conftest import by_profile
from test_batch_invariance import assert_bitwise

pytest_plugins = ["native_support"]

FIXTURE_OK = settings(max_examples=by_profile(25, 500), suppress_health_check=[HealthCheck.function_scoped_fixture])
TOP = 2.0**31
WIDTHS = [1, 3, 8, 17, 64, 130]


def numba_rows(positions, freqs, amp, plan: ColumnPlan, width: int, dtype) -> np.ndarray:
    out = np.full((positions.shape[0], width), np.nan, dtype=dtype)
    nb_kernels.sincos_rows(positions, freqs, amp, out.reshape(-1), plan.row_stride, plan.sin_base, plan.cos_base,
                           plan.interleaved, plan.n_cos, 0, positions.shape[0])
    return out


def native_rows(kernels, positions, freqs, amp, plan: ColumnPlan, width: int, dtype) -> np.ndarray:
    out = np.full((positions.shape[0], width), np.nan, dtype=dtype)
    kernels.sincos_rows(positions, freqs, amp, out.reshape(-1), plan, 0, positions.shape[0])
    return out


def each_alone(positions, freqs, amp, plan, width, dtype) -> np.ndarray:
    """Every row computed by numba in a call of its own: the definition a batch must match."""
    return np.concatenate([numba_rows(positions[k:k + 1], freqs, amp, plan, width, dtype)
                           for k in range(positions.shape[0])])


@st.composite
def batches(draw):
    """(positions, index of the target row): the target amid neighbours of every kind."""
    target = draw(st.one_of(st.integers(-2**31, 2**31).map(float), st.integers(-3000, 3000).map(float),
                            st.floats(-TOP, TOP, allow_nan=False), st.floats(-40.0, 40.0, allow_nan=False)))
    parts = [np.array([target])]
    for kind in draw(st.lists(st.sampled_from(["run", "huge", "fractional", "integers", "shuffled run"]),
                              max_size=4)):
        if kind in ("run", "shuffled run"):  # a contiguous range around the target, across split boundaries
            before, after = draw(st.integers(0, 40)), draw(st.integers(0, 1100))
            run = np.clip(target + np.arange(-before, after + 1.0), -TOP, TOP)
            parts.append(np.random.default_rng(before).permutation(run) if kind == "shuffled run" else run)
        elif kind == "huge":
            parts.append(np.array(draw(st.lists(st.sampled_from([-TOP, TOP, -TOP + 1, TOP - 0.5]), min_size=1,
                                                max_size=3))))
        elif kind == "fractional":
            parts.append(np.array(draw(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=5))))
        else:
            parts.append(np.array(draw(st.lists(st.integers(-2**31, 2**31), min_size=1, max_size=8)), dtype=float))
    order = draw(st.permutations(range(len(parts))))
    positions = np.concatenate([parts[k] for k in order])
    return np.ascontiguousarray(positions), int(sum(parts[k].size for k in order[:order.index(0)]))


def spec_case(dim: int, layout: str):
    spec = SinusoidalSpec(dim, layout=layout)
    return spec.freqs, np.full(spec.n_sin, 1.0), spec.column_plan(), dim


@FIXTURE_OK
@given(batch=batches(), dim=st.sampled_from(WIDTHS), layout=st.sampled_from(["interleaved", "halves", "t2t"]),
       dtype=st.sampled_from([np.float32, np.float64]))
def test_every_path_gives_each_row_its_alone_value(kernels, batch, dim, layout, dtype):
    positions, _ = batch
    freqs, amp, plan, width = spec_case(dim, layout)
    expected = each_alone(positions, freqs, amp, plan, width, dtype)
    assert_bitwise(native_rows(kernels, positions, freqs, amp, plan, width, dtype), expected)
    assert_bitwise(numba_rows(positions, freqs, amp, plan, width, dtype), expected)


@FIXTURE_OK
@given(batch=batches(), attention=st.sampled_from([1.0, 1.2247]), dtype=st.sampled_from([np.float32, np.float64]))
def test_rope_pair_layout_rows_do_not_depend_on_the_call(kernels, batch, attention, dtype):
    """RoPE's [2, n, n_freq] cos/sin buffer: the row's values wherever it sits in the buffer."""
    positions, k = batch
    inv, _ = RopeSpec(128, base=500000.0).inv_freq()
    n, n_freq = positions.shape[0], inv.shape[0]
    amp = np.full(n_freq, attention)
    buf = np.full((2, n, n_freq), np.nan, dtype=dtype)
    plan = ColumnPlan(row_stride=n_freq, sin_base=n * n_freq, cos_base=0, interleaved=False, n_cos=n_freq)
    kernels.sincos_rows(positions, inv, amp, buf.reshape(-1), plan, 0, n)
    alone_plan = ColumnPlan(row_stride=2 * n_freq, sin_base=n_freq, cos_base=0, interleaved=False, n_cos=n_freq)
    alone = numba_rows(positions[k:k + 1], inv, amp, alone_plan, 2 * n_freq, dtype)[0]
    assert_bitwise(np.concatenate([buf[0, k], buf[1, k]]), alone)


def test_a_huge_neighbour_leaves_later_rows_alone(kernels):
    """The reported case: -2^31 before 0..4095 once disturbed the next 1024 rows (2.7e-7)."""
    freqs, amp, plan, width = spec_case(128, "interleaved")
    positions = np.concatenate([[-TOP], np.arange(4096.0)])
    with_huge = native_rows(kernels, positions, freqs, amp, plan, width, np.float64)
    alone = native_rows(kernels, np.arange(4096.0), freqs, amp, plan, width, np.float64)
    assert_bitwise(with_huge[1:], alone)


def test_a_libm_lane_does_not_change_its_neighbour_lanes(kernels):
    """Angles past 2^45 take vsincos.h's extra 2*pi step and past 2^62 libm, each chosen lane by
    lane: once, one libm lane sent its whole vector (4 or 8 frequencies, depending on the path)
    to libm, so neighbours changed with the ISA."""
    positions = np.array([3.0 * 2**21 + 0.5, 2.0**22, 12345.0])
    # lane 0: angles 2^51.6, 2^52 (2*pi step) and 2^43.6; lane 4: 2^62.6, 2^63 (libm), 2^54.6
    freqs = np.array([2.0**30, 1.0, 0.25, 1e-3, 2.0**41, 0.5, 0.125, 3.0, 7.0])
    plan = ColumnPlan(row_stride=2 * freqs.size, sin_base=0, cos_base=1, interleaved=True, n_cos=freqs.size)
    got = native_rows(kernels, positions, freqs, np.ones(freqs.size), plan, 2 * freqs.size, np.float64)
    for i, w in enumerate(freqs):  # each frequency on its own: a vector with one live lane
        single = ColumnPlan(row_stride=2, sin_base=0, cos_base=1, interleaved=True, n_cos=1)
        alone = native_rows(kernels, positions, freqs[i:i + 1], np.ones(1), single, 2, np.float64)
        assert_bitwise(np.ascontiguousarray(got[:, 2 * i:2 * i + 2]), alone)
        assert_bitwise(alone, numba_rows(positions, freqs[i:i + 1], np.ones(1), single, 2, np.float64))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_rotation_is_bitwise_numba(kernels, interleaved, dtype):
    """Every pair rotated as fma(-b, sin, a*cos), fma(a, sin, b*cos): vector lanes, the scalar
    tail (n_freq not a multiple of the vector width) and numba agree exactly."""
    rng = np.random.default_rng(4)
    for head_dim, n_freq in [(64, 32), (40, 13), (6, 3)]:
        x = rng.standard_normal((2, 29, head_dim)).astype(dtype)
        angles = rng.uniform(0, 1e4, (29, n_freq))
        cos, sin = np.ascontiguousarray(np.cos(angles)), np.ascontiguousarray(np.sin(angles))
        out, ref = np.empty_like(x), np.empty_like(x)
        kernels.rope_rotate_rows(x, cos, sin, interleaved, out, 0, 29)
        nb_kernels.rope_rotate_rows(x, cos, sin, interleaved, ref, 0, 29)
        assert_bitwise(out, ref)


def test_wide_tables_without_part_caches_agree(kernels):
    """Above 2048 frequencies the part caches hold one row each (bounded scratch): same bits."""
    freqs = 1.0 / 10000.0 ** (np.arange(2050) / 2050)
    plan = ColumnPlan(row_stride=2 * 2050, sin_base=0, cos_base=2050, interleaved=False, n_cos=2050)
    positions = np.concatenate([np.arange(1000.0, 1040.0), [-TOP, 7.5, 3.0]])
    got = native_rows(kernels, positions, freqs, np.ones(2050), plan, 4100, np.float64)
    assert_bitwise(got, each_alone(positions, freqs, np.ones(2050), plan, 4100, np.float64))


def test_numba_and_c_share_the_split_and_the_cache_bound():
    """The split defines the values: the numba kernel must use the constants posenc.h states."""
    header = (Path(__file__).resolve().parents[2] / "native" / "include" / "posenc.h").read_text()
    body = (Path(__file__).resolve().parents[2] / "native" / "src" / "kernels_body.h").read_text()
    assert int(re.search(r"#define POSENC_SPLIT_COARSE (\d+)", header)[1]) == trig.SPLIT_COARSE
    assert int(re.search(r"#define POSENC_SPLIT_FINE (\d+)", header)[1]) == trig.SPLIT_FINE
    assert int(re.search(r"#define CACHE_MAX_FREQS (\d+)", body)[1]) == trig.CACHE_MAX_FREQS
