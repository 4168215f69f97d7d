"""Correctly rounded sin/cos tables (issue 37): every float32, float16 and bfloat16 element of a
sinusoidal or RoPE table is the exact amp * sin(p * w) (or cos) of the float64 position p,
frequency w and amplitude amp taken as real numbers, rounded once to nearest-even, on every path
(public API, native scalar / AVX2 / AVX-512 via SIMDe / AVX-512, numba). float64 output is not
promised correctly rounded and is not checked here.

The oracle is tests/sincos_oracle.py, which shares nothing with posenc's kernels: mpmath from 200
bits up until the rounding is decided (Ziv), rounded by integer arithmetic, and for whole columns of
2^24 positions a longdouble scan that hands mpmath every element it cannot decide. The hard cases
(elements within 1e-6 ulp of a rounding boundary, the nearest 1.4e-9) come from
tests/golden/hard_cases_f32.py.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import posenc
import pytest
import sincos_oracle as oracle
from conftest import by_profile
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from posenc.encodings import RopeSpec, SinusoidalSpec
from posenc.encodings.columns import ColumnPlan

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE / "native"))
pytest_plugins = ["native_support"]

GOLDEN = json.loads((HERE / "golden" / "hard_cases_f32.json").read_text())
SPECS = {spec["name"]: spec for spec in GOLDEN["specs"]}
HALF_TYPES = ("float16", "bfloat16")
ROUNDED_TYPES = ("float32", *HALF_TYPES)


def examples(default: int, *, fixture: bool = False) -> settings:
    """Hypothesis settings: `default` examples (ten times as many under the thorough profile);
    `fixture`: the test takes a function-scoped fixture (the same for every example)."""
    checks = [HealthCheck.too_slow, HealthCheck.data_too_large] + [HealthCheck.function_scoped_fixture] * fixture
    return settings(max_examples=by_profile(default, 10 * default), suppress_health_check=checks)


# --- how each spec's table is laid out -------------------------------------------------------------

def spec_of(golden: dict) -> SinusoidalSpec | RopeSpec:
    return SinusoidalSpec(**golden["args"]) if golden["kind"] == "sinusoidal" else RopeSpec(**golden["args"])


def frequencies(golden: dict) -> tuple[dict[int, float], float]:
    """{index: w} and amp as the golden recorded them."""
    return {int(i): float.fromhex(w) for i, w in golden["freqs"].items()}, float.fromhex(golden["amplitude"])


def api_columns(golden: dict, positions: np.ndarray, dtype: str = "float32") -> dict[str, Callable]:
    """{public function: column(index, which) -> that table column} at `positions`."""
    spec = spec_of(golden)
    if golden["kind"] == "sinusoidal":  # interleaved: sin_i at 2i, cos_i at 2i + 1
        table = posenc.sinusoidal(positions, **golden["args"], dtype=dtype)
        return {"sinusoidal": lambda i, which: table[:, 2 * i + (which == "cos")]}
    n = spec.n_freq
    rows = posenc.api.rope_table(positions, spec, dtype=dtype)  # [cos | sin]
    cos, sin = posenc.rope_cos_sin(positions, spec, dtype=dtype)
    return {"rope_table": lambda i, which: rows[:, i + n * (which == "sin")],
            "rope_cos_sin": lambda i, which: (cos if which == "cos" else sin)[:, i]}


def kernel_pairs(sincos_rows, positions: np.ndarray, freqs: np.ndarray, amps: np.ndarray, *, numba: bool = False):
    """float32 (sin, cos) [n, len(freqs)] from a kernel's sincos_rows in the two row layouts the
    library uses: interleaved pairs (sinusoidal) and [cos | sin] blocks (RoPE)."""
    n, m = positions.shape[0], freqs.shape[0]
    plans = {"interleaved": ColumnPlan(row_stride=2 * m, sin_base=0, cos_base=1, interleaved=True, n_cos=m),
             "blocks": ColumnPlan(row_stride=2 * m, sin_base=m, cos_base=0, interleaved=False, n_cos=m)}
    out = {}
    for name, plan in plans.items():
        flat = np.full(n * 2 * m, np.nan, dtype=np.float32)
        if numba:
            sincos_rows(positions, freqs, amps, flat, plan.row_stride, plan.sin_base, plan.cos_base, plan.interleaved,
                        plan.n_cos, 0, n)
        else:
            sincos_rows(positions, freqs, amps, flat, plan, 0, n)
        rows = flat.reshape(n, 2 * m)
        out[name] = (rows[:, 0::2], rows[:, 1::2]) if plan.interleaved else (rows[:, m:], rows[:, :m])
    return out


def mismatches(got: np.ndarray, expected_bits: np.ndarray, labels) -> list:
    """The labels of float32 `got` whose bits differ from `expected_bits`."""
    return [label for label, ok in zip(labels, got.view(np.uint32) == expected_bits) if not ok]


# --- the oracle itself ----------------------------------------------------------------------------

def test_oracle_rounding_matches_ieee_casts_of_exact_inputs():
    """`rounded` (mantissa arithmetic) is numpy's own single rounding where the input is a double:
    float64 -> float32 / float16 (subnormals, ties, overflow included), float32 -> bfloat16."""
    rng = np.random.default_rng(37)
    x = rng.standard_normal(3000) * 10.0 ** rng.integers(-46, 6, 3000)
    ties = [1 + 2.0**-24, 1 + 3 * 2.0**-24, 2.0**-150, 3 * 2.0**-150, 65520.0, 65519.99, 2.0**-25, 1 + 2.0**-11]
    x = np.concatenate([x, ties, np.negative(ties)])
    as_float32 = x.astype(np.float32).astype(np.float64)
    for dtype, source in (("float32", x), ("float16", x), ("bfloat16", as_float32[as_float32 != 0])):  # mpf has no -0
        with np.errstate(over="ignore"):
            expected = source.astype(oracle.NUMPY_DTYPES[dtype]).view(oracle.UINT[dtype])
        got = oracle.bits([oracle.rounded(oracle.mpmath.mpf(v), dtype) for v in source.tolist()], dtype)
        assert (got == expected).all(), (dtype, source[got != expected][:5])


def test_oracle_decides_tiny_angles_and_zero_angles_exactly():
    """cos(2^-145) * amp for a float32-midpoint amp lies 2^-291 below the midpoint: the oracle must
    go past 200 bits to see it; at the zero angle cos * amp is the midpoint itself (ties to even)."""
    amp = 1 + 3 * 2.0**-24
    assert oracle.correctly_rounded(2.0**-145, 1.0, amp, "cos", "float32") == 1 + 2.0**-23
    assert oracle.correctly_rounded(0.0, 0.7, amp, "cos", "float32") == 1 + 2.0**-22
    assert oracle.correctly_rounded(0.0, 0.7, amp, "sin", "float32") == 0.0


@pytest.mark.skipif(not oracle.LONGDOUBLE_OK, reason=f"numpy longdouble has {oracle.LONGDOUBLE_BITS} significand "
                    "bits on this platform (a double): the scans need x87's 64 or quad's 113")
def test_longdouble_scan_is_mpmath_on_samples():
    """The scan's error stays far inside the margin it stands on, and its values are mpmath's."""
    assert oracle.longdouble_error(120) * 2.0**-64 < oracle.MARGIN / 16
    w, amp = 0.8146172338565447, 1.138629436111989
    chunk = next(oracle.scan_column(w, amp, stop=oracle.T * 8, chunk_rows=8))
    for p in np.random.default_rng(1).integers(0, oracle.T * 8, 40).tolist():
        for which in oracle.WHICH:
            assert chunk.values[which][p] == oracle.correctly_rounded(float(p), w, amp, which, "float32")


# --- a. the hard cases, every path ----------------------------------------------------------------

@pytest.mark.parametrize("name", SPECS)
def test_golden_specs_still_have_their_frequencies(name):
    """The golden's w and amp are what the spec gives today (else: regenerate the golden)."""
    golden = SPECS[name]
    freqs, amp = frequencies(golden)
    spec = spec_of(golden)
    today, today_amp = (spec.freqs, spec.amplitude) if golden["kind"] == "sinusoidal" else spec.inv_freq()
    assert {i: float(today[i]) for i in freqs} == freqs and today_amp == amp


def hard_cases(golden: dict):
    """(positions [n], their index/which/expected bits, per-case labels) of one spec's hard cases."""
    cases = golden["cases"]
    positions = np.array([case["p"] for case in cases], dtype=np.float64)
    expected = np.array([int(case["f32"], 16) for case in cases], dtype=np.uint32)
    return cases, positions, expected


@pytest.mark.parametrize("name", SPECS)
def test_hard_cases_public_api(name):
    """posenc.sinusoidal / rope_table / rope_cos_sin at the hard positions: the golden bits, in a
    call of the hard rows alone and in contiguous runs around each (the consecutive-rows path)."""
    golden = SPECS[name]
    cases, positions, expected = hard_cases(golden)
    runs = np.concatenate([np.arange(max(p - 40, 0), p + 24) for p in positions.astype(np.int64)]).astype(np.float64)
    at = {p: k for k, p in enumerate(runs.tolist())}
    row_in_runs = np.array([at[p] for p in positions.tolist()])
    bad = []
    for layout, calls, rows in (("alone", positions, np.arange(len(cases))), ("runs", runs, row_in_runs)):
        for function, column in api_columns(golden, calls).items():
            got = np.array([column(case["i"], case["which"])[row] for case, row in zip(cases, rows)], dtype=np.float32)
            bad += mismatches(got, expected, [(function, layout, c["p"], c["i"], c["which"]) for c in cases])
    assert not bad, f"{len(bad)} hard-case elements not correctly rounded: {bad[:8]}"


def check_kernel_hard_cases(sincos_rows, numba: bool = False):
    bad = []
    for golden in SPECS.values():
        cases, positions, expected = hard_cases(golden)
        freqs, amp = frequencies(golden)
        indices = sorted(freqs)
        w = np.array([freqs[i] for i in indices])
        for layout, (sin, cos) in kernel_pairs(sincos_rows, positions, w, np.full(w.shape[0], amp), numba=numba).items():
            got = np.array([(sin if c["which"] == "sin" else cos)[k, indices.index(c["i"])] for k, c in enumerate(cases)],
                           dtype=np.float32)
            bad += mismatches(got, expected, [(golden["name"], layout, c["p"], c["i"], c["which"]) for c in cases])
    assert not bad, f"{len(bad)} hard-case elements not correctly rounded: {bad[:8]}"


def test_hard_cases_native_kernels(kernels):
    """Each native path (scalar, avx2, avx512-simde, avx512) writes the golden bits."""
    check_kernel_hard_cases(kernels.sincos_rows)


def test_hard_cases_numba_kernel():
    """The numba fallback (run even where the native library is built) writes the golden bits."""
    from posenc.kernels import trig

    check_kernel_hard_cases(trig.sincos_rows, numba=True)


#: (dtype, amp, which, p) with w = 1: a small angle's sin(x) = x(1 - x^2/6) and cos(x) = 1 - x^2/2
#: are x and 1 in float64, and amp makes amp*x (amp) a midpoint of the output grid whose tie goes
#: up to even, while the exact value lies just below it: a float64 value rounded again is 1 ulp high.
#: The last: cos(2^-145) = 1 - 2^-291, decided only by an exact path of ~300 bits.
TRAPS = [("float32", 1 + 3 * 2.0**-24, "sin", 2.0**-40), ("float32", 1 + 3 * 2.0**-24, "cos", 2.0**-30),
         ("bfloat16", 1 + 3 * 2.0**-8, "sin", 2.0**-40), ("bfloat16", 1 + 3 * 2.0**-8, "cos", -(2.0**-30)),
         ("float16", 1 + 3 * 2.0**-11, "cos", 2.0**-30), ("float32", 1 + 3 * 2.0**-24, "cos", -(2.0**-145))]


@pytest.mark.parametrize(("dtype", "amp", "which", "p"), TRAPS)
def test_double_rounding_traps_public_api(dtype, amp, which, p):
    """rope_cos_sin / rope_table with that amp as YaRN's attention factor (frequency 0 is w = 1)."""
    spec = RopeSpec(8, scaling={"rope_type": "yarn", "factor": 4.0, "attention_factor": amp,
                                "original_max_position_embeddings": 4096})
    expected = oracle.correctly_rounded(p, 1.0, amp, which, dtype)
    cos, sin = posenc.rope_cos_sin([p], spec, dtype=dtype)
    rows = posenc.api.rope_table([p], spec, dtype=dtype)
    got = {"rope_cos_sin": (sin if which == "sin" else cos)[0, 0], "rope_table": rows[0, 4 * (which == "sin")]}
    assert {k: float(v) for k, v in got.items()} == {k: expected for k in got}, \
        (expected.hex(), {k: float(v).hex() for k, v in got.items()})


def test_double_rounding_traps_kernels(kernels):
    """The float32 traps through each native path's sincos_rows."""
    check_kernel_traps(kernels.sincos_rows)


def test_double_rounding_traps_numba_kernel():
    from posenc.kernels import trig

    check_kernel_traps(trig.sincos_rows, numba=True)


def check_kernel_traps(sincos_rows, numba: bool = False):
    bad = []
    for dtype, amp, which, p in TRAPS:
        if dtype == "float32":
            expected = oracle.correctly_rounded(p, 1.0, amp, which, dtype)
            for layout, (sin, cos) in kernel_pairs(sincos_rows, np.array([p]), np.ones(1), np.full(1, amp),
                                                   numba=numba).items():
                got = float((sin if which == "sin" else cos)[0, 0])
                bad += [] if got == expected else [(layout, which, p, got.hex(), expected.hex())]
    assert not bad, bad


# --- b. every position 0..2^24-1 through the public API ---------------------------------------------

@pytest.mark.skipif(not oracle.LONGDOUBLE_OK, reason=f"numpy longdouble has {oracle.LONGDOUBLE_BITS} significand "
                    "bits on this platform (a double): no fast exact oracle for 2^24 positions")
@pytest.mark.parametrize("name", SPECS)
def test_every_position_below_2_24_is_correctly_rounded(name):
    """All 2^24 integer positions of the golden's sampled frequency columns (sin and cos), through
    the public API's float32 tables, bit for bit against the longdouble + mpmath oracle (spot-checked
    against mpmath once per 2^18 positions); 9-12 s a spec on this project's 2-core AVX-512 dev VM."""
    golden = SPECS[name]
    freqs, amp = frequencies(golden)
    stop, began = GOLDEN["positions"][1] + 1, time.perf_counter()
    columns = [oracle.scan_column(w, amp, stop) for w in freqs.values()]
    bad, count, rng = [], {}, np.random.default_rng(24)
    for chunks in zip(*columns):
        start = chunks[0].start
        positions = np.arange(start, start + chunks[0].values["sin"].shape[0], dtype=np.float64)
        k = int(rng.integers(positions.shape[0]))  # the scan itself, spot-checked against mpmath across the range
        for w, chunk in zip(freqs.values(), chunks):
            for which in oracle.WHICH:
                assert chunk.values[which][k] == oracle.correctly_rounded(positions[k], w, amp, which, "float32")
        for function, column in api_columns(golden, positions).items():
            for i, chunk in zip(freqs, chunks):
                for which in oracle.WHICH:
                    wrong = np.flatnonzero(column(i, which).view(np.uint32) != chunk.values[which].view(np.uint32))
                    count[function] = count.get(function, 0) + wrong.size
                    bad += [(function, start + int(k), i, which) for k in wrong[:3]]
    print(f"{name}: {stop} positions x {len(freqs)} columns x sin/cos in {time.perf_counter() - began:.1f} s, "
          f"elements not correctly rounded per public function: {count}")
    assert not any(count.values()), f"elements of {name} not correctly rounded: {count}, e.g. {bad[:8]}"


# --- c. properties: any position, frequency and amplitude -------------------------------------------

positions_st = st.one_of(
    st.integers(-2**53, 2**53).map(float),
    st.integers(0, 2**24 + 4).map(float),
    st.floats(-2.0**53, 2.0**53, allow_nan=False, allow_infinity=False),
    st.floats(-64.0, 64.0, allow_nan=False, allow_infinity=False))
frequency_st = st.one_of(st.floats(2.0**-40, 1.0), st.floats(1.0, 16.0), st.sampled_from([1.0, 0.5, 2.0**-20]))
amplitude_st = st.one_of(st.floats(2.0**-8, 2.0**8), st.floats(-4.0, -2.0**-8), st.sampled_from(
    [1.0, 1 + 2.0**-24, 1 + 3 * 2.0**-24, 0.7, 1.138629436111989]))


def expected_table(positions, freqs, amps, dtype: str) -> dict[str, np.ndarray]:
    """{"sin", "cos"}: [n, m] correctly rounded values (floats) from mpmath."""
    return {which: np.array([[oracle.correctly_rounded(p, w, a, which, dtype) for w, a in zip(freqs, amps)]
                             for p in positions]) for which in oracle.WHICH}


def same_rounding(got: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Where `got` is `expected` (floats holding rounded values) bit for bit; where expected is +0
    (the exact value 0, whose sign nothing defines, or a positive value below the grid), either zero."""
    got, expected = np.asarray(got, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    either_zero = (expected == 0) & ~np.signbit(expected) & (got == 0)
    return ((got == expected) & (np.signbit(got) == np.signbit(expected))) | either_zero


def assert_rounded_table(got: dict[str, np.ndarray], expected: dict[str, np.ndarray], what) -> None:
    """`got` (tables of the output dtype, as float64) is `expected` for sin and cos."""
    for which in oracle.WHICH:
        same = same_rounding(got[which], expected[which])
        assert same.all(), (what, which, np.argwhere(~same)[:4].tolist(), np.asarray(got[which])[~same][:4].tolist(),
                            expected[which][~same][:4].tolist())


@examples(25, fixture=True)
@given(positions=st.lists(positions_st, min_size=1, max_size=4), freqs=st.lists(frequency_st, min_size=1, max_size=3),
       data=st.data())
def test_kernels_round_any_element_once(kernels, positions, freqs, data):
    """Each native path, float32 output: drawn positions (integers to 2^53, fractional, negative),
    frequencies and amplitudes (float32 midpoints among them)."""
    amps = data.draw(st.lists(amplitude_st, min_size=len(freqs), max_size=len(freqs)))
    positions, freqs, amps = np.array(positions), np.array(freqs), np.array(amps)
    expected = expected_table(positions, freqs, amps, "float32")
    for layout, (sin, cos) in kernel_pairs(kernels.sincos_rows, positions, freqs, amps).items():
        assert_rounded_table({"sin": sin, "cos": cos}, expected, (kernels.name, layout, positions, freqs, amps))


@examples(30)
@given(positions=st.lists(positions_st, min_size=1, max_size=4), freqs=st.lists(frequency_st, min_size=1, max_size=3),
       data=st.data())
def test_numba_kernel_rounds_any_element_once(positions, freqs, data):
    from posenc.kernels import trig

    amps = data.draw(st.lists(amplitude_st, min_size=len(freqs), max_size=len(freqs)))
    positions, freqs, amps = np.array(positions), np.array(freqs), np.array(amps)
    expected = expected_table(positions, freqs, amps, "float32")
    for layout, (sin, cos) in kernel_pairs(trig.sincos_rows, positions, freqs, amps, numba=True).items():
        assert_rounded_table({"sin": sin, "cos": cos}, expected, ("numba", layout, positions, freqs, amps))


@examples(40)
@given(positions=st.lists(positions_st, min_size=1, max_size=3), dim=st.integers(1, 9),
       base=st.floats(1.5, 1e7), target_std=st.one_of(st.none(), st.floats(0.01, 30.0)),
       dtype=st.sampled_from(ROUNDED_TYPES))
def test_sinusoidal_rounds_once_in_every_dtype(positions, dim, base, target_std, dtype):
    """posenc.sinusoidal (interleaved, odd widths too) in float32, float16 and bfloat16."""
    spec = SinusoidalSpec(dim, base=base, target_std=target_std)
    table = posenc.sinusoidal(positions, dim, base=base, target_std=target_std, dtype=dtype)
    n_sin = spec.n_sin
    expected = expected_table(positions, spec.freqs, np.full(n_sin, spec.amplitude), dtype)
    got = {"sin": table[:, 0::2].astype(np.float64), "cos": table[:, 1::2].astype(np.float64)}
    expected["cos"] = expected["cos"][:, : spec.n_cos]
    assert_rounded_table(got, expected, ("sinusoidal", dtype))


@examples(40)
@given(positions=st.lists(positions_st, min_size=1, max_size=3), half=st.integers(1, 5), base=st.floats(1.5, 1e7),
       attention=st.one_of(st.none(), st.floats(0.25, 4.0)), dtype=st.sampled_from(ROUNDED_TYPES))
def test_rope_cos_sin_rounds_once_in_every_dtype(positions, half, base, attention, dtype):
    """posenc.rope_cos_sin and rope_table with an attention factor (YaRN's, given or derived) in
    float32, float16 and bfloat16."""
    scaling = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}
    if attention is not None:
        scaling["attention_factor"] = attention
    spec = RopeSpec(2 * half, base=base, scaling=scaling)
    inv, amp = spec.inv_freq()
    expected = expected_table(positions, inv, np.full(inv.shape[0], amp), dtype)
    cos, sin = posenc.rope_cos_sin(positions, spec, dtype=dtype)
    assert_rounded_table({"sin": sin.astype(np.float64), "cos": cos.astype(np.float64)}, expected, ("rope_cos_sin", dtype))
    rows = posenc.api.rope_table(positions, spec, dtype=dtype).astype(np.float64)
    assert_rounded_table({"sin": rows[:, half:], "cos": rows[:, :half]}, expected, ("rope_table", dtype))


# --- d. posenc.crmath.sincos_rounded ----------------------------------------------------------------

@pytest.fixture
def sincos_rounded():
    """posenc.crmath.sincos_rounded (its module, crmath._trig, until the package exports it)."""
    from posenc import crmath

    found = getattr(crmath, "sincos_rounded", None)
    if found is None:
        found = getattr(pytest.importorskip("posenc.crmath._trig", reason="no posenc.crmath.sincos_rounded yet "
                                            "(issue 37)"), "sincos_rounded", None)
    if found is None:
        pytest.skip("posenc.crmath.sincos_rounded is not there yet (issue 37)")
    return found


def check_scalar(sincos_rounded, p: float, w: float, amp: float, which: str, dtype: str) -> None:
    got, expected = sincos_rounded(p, w, amp, which, dtype), oracle.correctly_rounded(p, w, amp, which, dtype)
    assert isinstance(got, float)
    assert same_rounding(got, expected), (p, w, amp, which, dtype, got.hex(), expected.hex())


def test_sincos_rounded_hard_cases(sincos_rounded):
    """Every golden hard case, float32 bits."""
    for golden in SPECS.values():
        freqs, amp = frequencies(golden)
        for case in golden["cases"]:
            got = sincos_rounded(float(case["p"]), freqs[case["i"]], amp, case["which"], "float32")
            assert int(oracle.bits(got, "float32")) == int(case["f32"], 16), (golden["name"], case)


SPECIAL = [
    (0.0, 1.0, 1.0), (0.0, 0.3, 1 + 2.0**-24), (0.0, 0.3, 1 + 3 * 2.0**-24), (0.0, 0.3, 1 + 2.0**-11),
    (0.0, 0.3, 1 + 2.0**-8), (0.0, 0.3, 1 + 3 * 2.0**-8), (-0.0, 0.5, 0.7), (0.0, 0.3, -1.5),  # p*w == 0
    (2.0**60, 1.0, 1.0), (2.0**70, 1.0, 1.0), (2.0**53, 2.0**17, 1.0), (-(2.0**70), 1.0, 2.5),  # huge angles
    (1e300, 1e-300, 1.0), (1e300, 1e-290, 1.0), (-1e300, 3e-295, 0.8),
    (-12345.0, 0.8146172338565447, 1.138629436111989), (-0.75, 3.0, 1.0), (2.0**-30, 2.0**-20, 1.0),
    (355.0, 1.0, 1.0), (-710.0, 0.5, 1.0), (11786698.0, 1.0, 1.138629436111989),
    *[(p, 1.0, amp) for _, amp, _, p in TRAPS],
]


@pytest.mark.parametrize("dtype", ROUNDED_TYPES)
@pytest.mark.parametrize("which", oracle.WHICH)
@pytest.mark.parametrize(("p", "w", "amp"), SPECIAL)
def test_sincos_rounded_special_values(sincos_rounded, p, w, amp, which, dtype):
    """Zero angles (sin exactly 0, cos the amplitude rounded: float32/16-bit midpoints among them),
    angles of 2^60, 2^70 and 1e300 * tiny, negative positions and amplitudes, near multiples of pi."""
    check_scalar(sincos_rounded, p, w, amp, which, dtype)


@examples(150, fixture=True)
@given(p=positions_st, w=frequency_st, amp=amplitude_st, which=st.sampled_from(oracle.WHICH),
       dtype=st.sampled_from(ROUNDED_TYPES))
def test_sincos_rounded_drawn(sincos_rounded, p, w, amp, which, dtype):
    check_scalar(sincos_rounded, p, w, amp, which, dtype)
