"""Batch invariance of the public API and of tables: a row's value depends only on
(spec, position, dtype), bit for bit, in float32, float64, float16 and bfloat16.

The same position is asked alone (a small call: the numba kernels) and inside big calls (the
native kernels) with every kind of neighbour, shuffled or contiguous; read from a published
table (float32 and float64) or computed; and every 16-bit output must be the single rounding of
the float64 output. Kernel paths against each other: tests/native/test_invariance.py."""

import math

import numpy as np
import posenc
import pytest
from conftest import DTYPES, assert_matches_oracle, by_profile
from crmath_oracle import cr_exp, cr_log, cr_pow
from hypothesis import given, settings
from hypothesis import strategies as st
from posenc import crmath, native, reference
from posenc.api import rope_table
from posenc.dtypes import OUTPUT_DTYPES, cast_output, half_midpoints, midpoint_rows
from posenc.shm import attach
from posenc.tables import TableSpec

pytest_plugins = ["shm_support"]

TOP = 2.0**31
HALF = {"float16": (10, -14), "bfloat16": (7, -126)}
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8192}
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}  # attention factor 1.139


def sinusoidal_rows(spec_kwargs):
    return lambda positions, dtype: posenc.sinusoidal(positions, dtype=dtype, **spec_kwargs)


def rope_cos_sin_rows(spec):
    return lambda positions, dtype: np.concatenate(posenc.rope_cos_sin(positions, spec, dtype=dtype), axis=1)


def rope_table_rows(spec):
    return lambda positions, dtype: rope_table(positions, spec, dtype=dtype)


#: name -> rows(positions, dtype): each family's public function, one row per position
FUNCTIONS = {
    "sinusoidal interleaved 128": sinusoidal_rows({"dim": 128}),
    "sinusoidal halves 33 target_std": sinusoidal_rows({"dim": 33, "layout": "halves", "target_std": 0.02}),
    "sinusoidal t2t 65 scale": sinusoidal_rows({"dim": 65, "layout": "t2t", "scale": np.linspace(0.5, 2.0, 65)}),
    "rope_cos_sin llama3 128": rope_cos_sin_rows(posenc.RopeSpec(128, base=500000.0, scaling=LLAMA3)),
    "rope_table yarn 64": rope_table_rows(posenc.RopeSpec(64, scaling=YARN)),
}


def bits(arr: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(arr).view({2: np.uint16, 4: np.uint32, 8: np.uint64}[arr.dtype.itemsize])


def assert_bitwise(actual, expected) -> None:
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, (actual.dtype, actual.shape)
    differ = bits(actual) != bits(expected)
    first = np.argwhere(differ)[0] if differ.any() else None
    assert first is None, f"{int(differ.sum())} of {differ.size} values differ; first at {first.tolist()}: " \
                          f"{actual[tuple(first)]!r} vs {expected[tuple(first)]!r}"


def round_once(x: np.ndarray, dtype: str) -> np.ndarray:
    """x (float64) rounded to nearest even on the 16-bit grid, computed directly: the value
    grid step is 2^(max(e, emin) - mant), and rint on the exactly scaled value rounds once."""
    mant, emin = HALF[dtype]
    _, e = np.frexp(np.abs(x))
    step = np.maximum(e - 1, emin) - mant
    return np.ldexp(np.rint(np.ldexp(x, -step)), step)


@st.composite
def neighbourhoods(draw):
    """(positions, index of the target) with at least 2048/width rows, so the call runs on the
    native kernels while the target alone runs on numba."""
    target = draw(st.one_of(st.integers(-2**31, 2**31).map(float), st.integers(-2000, 5000).map(float),
                            st.floats(-2.0**24, 2.0**24, allow_nan=False)))
    kinds = draw(st.lists(st.sampled_from(["run", "huge", "fractional", "shuffled"]), min_size=1, max_size=3))
    parts = []
    for kind in kinds:
        if kind == "run":
            start = draw(st.integers(-40, 0))
            parts.append(np.clip(target + np.arange(start, start + 1100.0), -TOP, TOP))
        elif kind == "huge":
            parts.append(np.array([-TOP, TOP, -TOP + 1.0]))
        elif kind == "fractional":
            parts.append(draw(st.lists(st.floats(-1e5, 1e5, allow_nan=False), min_size=1, max_size=8)))
        else:
            parts.append(np.random.default_rng(len(parts)).integers(-2**31, 2**31, 200).astype(float))
    parts.append(np.arange(1100.0))  # padding: the call is big enough for the native path
    at = draw(st.integers(0, len(parts)))
    before = np.concatenate([np.asarray(p, dtype=float) for p in parts[:at]] or [np.empty(0)])
    after = np.concatenate([np.asarray(p, dtype=float) for p in parts[at:]] or [np.empty(0)])
    return np.concatenate([before, [target], after]), before.size


@settings(max_examples=by_profile(30, 500))
@given(batch=neighbourhoods(), name=st.sampled_from(sorted(FUNCTIONS)), dtype=st.sampled_from(DTYPES))
def test_a_row_is_the_same_alone_and_in_any_call(batch, name, dtype):
    positions, k = batch
    rows = FUNCTIONS[name]
    assert_bitwise(rows(positions, dtype)[k], rows(positions[k:k + 1], dtype)[0])


@settings(max_examples=by_profile(20, 500))
@given(batch=neighbourhoods(), name=st.sampled_from(sorted(FUNCTIONS)), dtype=st.sampled_from(sorted(HALF)))
def test_16bit_outputs_are_the_single_rounding_of_float64(batch, name, dtype):
    positions, _ = batch
    rows = FUNCTIONS[name]
    wide = rows(positions, "float64")
    assert np.array_equal(rows(positions, dtype).astype(np.float64), round_once(wide, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_huge_neighbour_changes_nothing(dtype):
    """The reported case: -2^31 before 0..4095 put rows up to 1024 later 2.7e-7 off."""
    rows = posenc.sinusoidal([-TOP] + list(range(4096)), 128, dtype=dtype)
    assert_bitwise(rows[1:], posenc.sinusoidal(np.arange(4096), 128, dtype=dtype))
    assert_matches_oracle(rows[1:], reference.sinusoidal(np.arange(4096), 128), dtype, angle_max=4096)


@pytest.mark.parametrize("dtype", DTYPES)
def test_contiguous_shuffled_and_split_calls_agree(dtype):
    positions = np.arange(-3000, 5000)
    whole = posenc.sinusoidal(positions, 64, dtype=dtype)
    order = np.random.default_rng(1).permutation(positions.size)
    assert_bitwise(posenc.sinusoidal(positions[order], 64, dtype=dtype), whole[order])
    cuts = [(0, 1), (1, 17), (17, 1041), (1041, 8000)]
    pieces = [posenc.sinusoidal(positions[a:b], 64, dtype=dtype) for a, b in cuts]
    assert_bitwise(np.concatenate(pieces), whole)
    singles = np.concatenate([posenc.sinusoidal(positions[k:k + 1], 64, dtype=dtype) for k in range(0, 8000, 97)])
    assert_bitwise(singles, whole[::97])


@pytest.mark.skipif(native.ACTIVE is None, reason=f"native library unavailable: {native.STATUS}")
@pytest.mark.parametrize("dtype", DTYPES)
def test_rope_apply_small_and_big_calls_agree(dtype):
    """rope_apply on a few rows (numba) and on many (native): the same rotated rows."""
    spec = posenc.RopeSpec(64, base=500000.0, scaling=LLAMA3)
    x = np.random.default_rng(2).standard_normal((4, 600, 64)).astype(OUTPUT_DTYPES[dtype])
    positions = np.concatenate([[-TOP, 3.5], np.arange(598)])
    big = posenc.rope_apply(x, positions, spec)
    starts = range(0, 600, 150)
    small = np.concatenate([posenc.rope_apply(x[:, k:k + 2], positions[k:k + 2], spec) for k in starts], axis=1)
    assert_bitwise(small, big[:, [k + d for k in starts for d in (0, 1)]])


# --- tables: a hit is the computed answer ------------------------------------------------------

TABLE_SPECS = {
    "sin128 f32": TableSpec(posenc.SinusoidalSpec(128), -500, 4096),
    "sin33 halves f64": TableSpec(posenc.SinusoidalSpec(33, layout="halves"), 0, 3000, dtype="float64"),
    "rope llama3 f32": TableSpec(posenc.RopeSpec(128, base=500000.0, scaling=LLAMA3), 0, 4096),
}


def computed(table: TableSpec, positions: np.ndarray, dtype: str) -> np.ndarray:
    """The public function's answer for the same spec: what a table hit must equal."""
    enc = table.encoding
    if table.kind == "rope":
        return rope_table(positions, enc, seq_len=table.seq_len, dtype=dtype)
    return posenc.sinusoidal(positions, enc.dim, base=enc.base, layout=enc.layout, dtype=dtype)


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    from posenc.shm import TableStore

    root = tmp_path_factory.mktemp("posenc-invariance-tables")
    store = TableStore(root)
    tables = {name: (store.publish(name.replace(" ", "-"), spec), spec) for name, spec in TABLE_SPECS.items()}
    yield {name: attach(info.name, root=root) for name, (info, _) in tables.items()}
    store.close()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(TABLE_SPECS))
def test_table_hits_equal_the_computed_rows(published, name, dtype):
    table = published[name]
    if OUTPUT_DTYPES[dtype].itemsize > table.spec.np_dtype.itemsize:
        pytest.skip("a float32 table does not serve float64")
    positions = np.arange(table.start, table.stop)
    hit = table.spec.cast_rows(table.lookup(positions), positions, OUTPUT_DTYPES[dtype])
    assert_bitwise(hit, computed(table.spec, positions.astype(np.float64), dtype))


@pytest.mark.parametrize("dtype", sorted(HALF))
def test_16bit_rows_from_a_float32_table_are_rounded_once(published, dtype):
    """Rounding the float32 table values again (f64 -> f32 -> f16) is wrong exactly where a
    float32 value is a 16-bit midpoint; cast_rows recomputes those rows."""
    table = published["sin128 f32"]
    positions = np.arange(table.start, table.stop)
    stored = table.lookup(positions)
    twice = stored.astype(OUTPUT_DTYPES[dtype])
    once = table.spec.cast_rows(stored, positions, OUTPUT_DTYPES[dtype])
    assert half_midpoints(stored, OUTPUT_DTYPES[dtype]).any(axis=1).sum() > 0
    assert (bits(twice) != bits(once)).any(), "some value must be rounded twice the naive way"
    wide = computed(table.spec, positions.astype(np.float64), "float64")
    assert np.array_equal(once.astype(np.float64), round_once(wide, dtype))


@pytest.mark.parametrize("dtype", sorted(HALF))
def test_the_midpoint_kernel_agrees_with_the_numpy_oracle(dtype):
    """tables.midpoint_rows (one numba pass a row) against dtypes.half_midpoints (numpy), on random
    float32 values and on every kind of edge: exact midpoints of the 16-bit grid, their float32
    neighbours, subnormals of both formats, the overflow threshold, zeros, inf and NaN."""
    target = OUTPUT_DTYPES[dtype]
    rng = np.random.default_rng(7)
    grid = rng.standard_normal(4096).astype(target).astype(np.float64)
    ulp = np.abs(np.spacing(grid.astype(target)).astype(np.float64))
    midpoints = (grid + ulp / 2).astype(np.float32)
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 65520.0, 65504.0, 2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -26,
                      1.5 * 2.0 ** -133, 2.0 ** -149, float(np.finfo(np.float32).max)], np.float32)
    patterns = rng.integers(0, 2 ** 32, 1 << 16, dtype=np.uint32)  # every exponent, subnormals, NaN payloads
    forced = [(patterns[i::24] >> sh << sh) | np.uint32(1 << (sh - 1)) for i, sh in enumerate(range(1, 25))]
    values = np.concatenate([rng.standard_normal(8192).astype(np.float32), midpoints, patterns.view(np.float32),
                             np.concatenate(forced).view(np.float32),
                             np.nextafter(midpoints, np.float32(np.inf)), edges,
                             rng.standard_normal(512).astype(np.float32) * np.float32(1e-5)])
    with np.errstate(invalid="ignore"):  # inf - floor(inf) in the oracle: NaN, not a midpoint
        each = half_midpoints(values, target)
    assert np.array_equal(midpoint_rows(values.reshape(-1, 1), target)[0], each)  # value by value
    values = np.resize(values, (values.size // 8 + 1) * 8).reshape(-1, 8)
    with np.errstate(invalid="ignore"):
        expected = half_midpoints(values, target).any(axis=1)
    assert expected.any() and not expected.all()
    flags, count = midpoint_rows(values, target)
    assert np.array_equal(flags, expected) and count == expected.sum()
    readonly = values.copy()
    readonly.flags.writeable = False  # rows read straight from a shared-memory mapping
    flags, count = midpoint_rows(readonly, target)
    assert np.array_equal(flags, expected) and count == expected.sum()


def test_scaled_float32_tables_refuse_16bit_rows():
    """A per-column scale is applied in float32 after the kernel's rounding: such values are
    not single roundings, so no exact 16-bit answer can be derived from them."""
    spec = TableSpec(posenc.SinusoidalSpec(4, scale=[1.0, 2.0, 0.5, 3.0]), 0, 4)
    assert not spec.rounds_once
    rows = np.zeros((4, 4), np.float32)
    spec.fill(rows)
    with pytest.raises(posenc.PosencError, match="dtype"):
        spec.cast_rows(rows, np.arange(4), OUTPUT_DTYPES["float16"])


def test_length_dependent_rope_tables_do_not_depend_on_their_build_blocks():
    """A dynamic-NTK table with seq_len None holds the init frequencies: each block used to take
    max(its positions) + 1, so rows changed with the block they were built in."""
    spec = posenc.RopeSpec(32, scaling={"rope_type": "dynamic", "factor": 2.0}, max_position_embeddings=64)
    table = TableSpec(spec, 0, 256)
    whole, blocks = np.empty(table.shape, np.float32), np.empty(table.shape, np.float32)
    table.fill(whole)
    table.fill(blocks, 0, 100)
    table.fill(blocks, 100, 256)
    assert_bitwise(blocks, whole)
    inv, attention = spec.inv_freq(None)
    cos, sin = reference.rope_cos_sin(np.arange(256), inv, attention)
    assert_matches_oracle(whole, np.concatenate([cos, sin], axis=1), "float32", angle_max=256)


# --- the cast ------------------------------------------------------------------------------------

def test_float64_to_bfloat16_rounds_once():
    """1 + 2^-8 + 2^-30 is just above the midpoint 1 + 2^-8: one rounding gives 1 + 2^-7;
    through float32 it becomes the midpoint and rounds to even, 1.0 (ml_dtypes before 0.7 cast
    float64 that way; cast_output is right whichever ml_dtypes is installed)."""
    x = np.array([1 + 2**-8 + 2**-30, -(1 + 2**-8 + 2**-30), 1 + 2**-8, 0.0, -0.0, np.inf, 3.0e38, 1e-40])
    got = cast_output(x, OUTPUT_DTYPES["bfloat16"]).astype(np.float64)
    assert got[0] == 1 + 2**-7 and got[1] == -(1 + 2**-7) and got[2] == 1.0 and np.signbit(got[4])
    assert np.array_equal(got, round_once(x, "bfloat16"))


@given(st.lists(st.floats(-1e30, 1e30, allow_nan=False, allow_subnormal=True), min_size=1, max_size=50))
def test_every_16bit_cast_is_one_rounding(values):
    x = np.array(values)
    for dtype in HALF:
        finite = np.abs(x) < (65504.0 if dtype == "float16" else 3.0e38)
        got = cast_output(x[finite], OUTPUT_DTYPES[dtype]).astype(np.float64)
        assert np.array_equal(got, round_once(x[finite], dtype))


# --- a fleet: AVX2 and AVX-512 nodes -------------------------------------------------------------

def test_frequencies_are_correctly_rounded_not_numpy_simd_or_libm():
    """numpy's float64 power/exp run SVML kernels on AVX-512 CPUs and libm on AVX2 ones, and glibc's
    pow is not correctly rounded (3 of these 4096 Vaswani values) and is another function on CPUs
    without FMA: with either, frequencies, and so every row, would differ between the nodes of a
    fleet. Specs take posenc.crmath's, correctly rounded: mpmath's value rounded once."""
    d = 8192
    vaswani = np.array([1.0 / cr_pow(10000.0, 2.0 * i / d) for i in range(d // 2)])
    assert_bitwise(posenc.SinusoidalSpec(d).freqs, vaswani)
    assert (vaswani != np.array([1.0 / math.pow(10000.0, 2.0 * i / d) for i in range(d // 2)])).sum() <= 8
    log_inc = cr_log(10000.0) / (d // 2 - 1)
    assert_bitwise(posenc.SinusoidalSpec(d, layout="t2t").freqs[::13],
                   np.array([1.0 * cr_exp(i * -log_inc) for i in range(d // 2)])[::13])
    inv, _ = posenc.RopeSpec(d, base=500000.0).inv_freq()
    assert_bitwise(inv, np.array([1.0 / cr_pow(500000.0, i / d) for i in range(0, d, 2)]))


def test_xpos_decay_is_correctly_rounded():
    """Each value zeta^(p / scale_base) correctly rounded (glibc's pow misrounds ~0.1 % of these)."""
    spec = posenc.RopeSpec(64, xpos_scale_base=512.0)
    positions = np.arange(-300.0, 3000.0)
    zeta = (np.arange(0, 64, 2) + 0.4 * 64) / (1.4 * 64)
    got = posenc.xpos_scale(positions, spec)
    assert_bitwise(got, np.array([[crmath.pow(z, p / 512.0) for z in zeta] for p in positions]))
    sample = [(r, i) for r in range(0, positions.size, 53) for i in range(0, zeta.size, 5)]
    assert [got[r, i] for r, i in sample] == [cr_pow(zeta[i], positions[r] / 512.0) for r, i in sample]
