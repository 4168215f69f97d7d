"""Exact angles (issue 34): sin/cos of the exact product position x float64 frequency, at every
magnitude up to 2^53, on every path, against an mpmath oracle (300 bits).

The kernels never round the angle p*w to one float64 (native/src/vsincos.h): each part of an
integer position (coarse + mid + fine, posenc.h "Batch invariance") and each fractional
position is multiplied into a double-double, reduced exactly modulo pi/2 and its sin/cos taken
within 1 ulp, and the parts are joined by the fixed angle addition. So the float64 value of a
row is off the exact amp*sin(p*w) by a few 2^-53 (ROW_BOUND, from the angle addition: below),
and float32 values are within 1 float32 ulp of it (not always the correctly rounded value:
that is a later issue). Rows of a multiple of 1024 (mid = fine = 0) and fractional positions
are one part alone, so there the part's own sin/cos is checked to 1 ulp of its value.

Bounds. A part's sin/cos: within 1 ulp of the exact value plus the reduction's absolute error
(below 2^-90, vsincos.h); PART_SLACK allows 2^-80. A row joins three parts with
S = fma(s_c, c_m, c_c s_m), A = amp S, sin = fma(A, c_f, B s_f) (and the cos mirror images):
with each part's error <= 2^-53 (values in [-1, 1]), S is within (2 sqrt 2 + 1) 2^-53, A within
amp (2 sqrt 2 + 1.5) 2^-53, the row within amp (sqrt 2 (2 sqrt 2 + 1.5) + sqrt 2 + 1) 2^-53 <
8.6 amp 2^-53; ROW_BOUND = 9 amp 2^-53 (the largest seen here is about 2.5 2^-53)."""

from __future__ import annotations

import os
import subprocess
import sys

import mpmath
import numpy as np
import posenc
import pytest
from conftest import by_profile
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from posenc import kernels as nb_kernels
from posenc import native
from posenc.encodings import RopeSpec, SinusoidalSpec
from posenc.encodings.columns import ColumnPlan

mpmath.mp.prec = 300

ROW_BOUND = 9 * 2.0**-53
PART_SLACK = 2.0**-80
TOP = 2**53
PAIR = ColumnPlan(row_stride=2, sin_base=0, cos_base=1, interleaved=True, n_cos=1)
PATH_NAMES = ["numba", *native.ISAS]
SETTINGS = settings(max_examples=by_profile(40, 400), deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


def exact_sin_cos(positions, freqs) -> tuple[np.ndarray, np.ndarray]:
    """sin and cos of the exact products (float64 times float64 is exact at 300 bits)."""
    sin = np.empty((len(positions), len(freqs)))
    cos = np.empty_like(sin)
    for r, p in enumerate(positions):
        for i, w in enumerate(freqs):
            angle = mpmath.mpf(float(p)) * mpmath.mpf(float(w))
            sin[r, i], cos[r, i] = float(mpmath.sin(angle)), float(mpmath.cos(angle))
    return sin, cos


def path_kernels(name: str):
    """The row kernel of one path, or None when this machine cannot run it."""
    return nb_kernels if name == "numba" else native.kernels_for(name)


def pair_rows(kernels, positions, freqs, amp=1.0, dtype="float64") -> tuple[np.ndarray, np.ndarray]:
    """(sin, cos) [n, n_freq] from the row kernel, one frequency per call in the pair layout."""
    positions = np.asarray(positions, dtype=np.float64)
    sin = np.empty((positions.shape[0], len(freqs)), dtype=dtype)
    cos = np.empty_like(sin)
    for i, w in enumerate(freqs):
        out = np.empty((positions.shape[0], 2), dtype=dtype)
        w_arr, amp_arr = np.array([w], dtype=np.float64), np.array([amp], dtype=np.float64)
        if kernels is nb_kernels:
            kernels.sincos_rows(positions, w_arr, amp_arr, out.reshape(-1), 2, 0, 1, True, 1, 0, positions.shape[0])
        else:
            kernels.sincos_rows(positions, w_arr, amp_arr, out.reshape(-1), PAIR, 0, positions.shape[0])
        sin[:, i], cos[:, i] = out[:, 0], out[:, 1]
    return sin, cos


def float32_ok(actual, exact, amp=1.0) -> np.ndarray:
    """float32 within 1 ulp of the exact value; values so small that ROW_BOUND is more than
    half an ulp of them (|v| < ~2^-25) within half an ulp plus ROW_BOUND."""
    ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    err = np.abs(actual.astype(np.float64) - exact)
    return err <= np.maximum(ulp, 0.5 * ulp + ROW_BOUND * amp)


def assert_rows_exact(actual, exact, amp=1.0, what=""):
    err = np.abs(actual.astype(np.float64) - exact)
    if actual.dtype == np.float64:
        assert err.max(initial=0.0) <= ROW_BOUND * amp, (what, err.max() / 2.0**-53)
    else:
        bad = ~float32_ok(actual, exact, amp)
        assert not bad.any(), (what, np.argwhere(bad)[:5].tolist(), actual[bad][:5], exact[bad][:5])


def assert_part_exact(actual, exact, what=""):
    """One part alone: within 1 ulp of the exact value (plus the reduction's absolute slack)."""
    err = np.abs(actual - exact)
    tol = np.spacing(np.abs(exact)) + PART_SLACK
    assert (err <= tol).all(), (what, np.argwhere(err > tol)[:5].tolist(), (err / np.spacing(np.abs(exact))).max())


def near_multiples_of_half_pi(w: float, scale: int, top: int = TOP) -> list[int]:
    """Multiples p = q*scale up to `top` whose angle p*w lies closest to a multiple m*pi/2: q the
    numerators of the continued-fraction convergents q/m of (pi/2)/(scale*w), and q +- 1,
    signed both ways."""
    rest = mpmath.pi / 2 / (mpmath.mpf(w) * scale)
    out, numerator, previous = [], 1, 0
    while True:
        term = int(mpmath.floor(rest))
        numerator, previous = term * numerator + previous, numerator
        if numerator * scale > top:
            break
        out += [numerator * scale, -numerator * scale, (numerator + 1) * scale, (numerator - 1) * scale]
        if rest == term:
            break
        rest = 1 / (rest - term)
    return sorted({p for p in out if 0 < abs(p) <= top})


SINUSOID = SinusoidalSpec(128)
ROPE = RopeSpec(128, base=500000.0, scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                             "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})
ROPE_FREQS, ROPE_ATTENTION = posenc.rope_inv_freq(ROPE)
#: frequencies whose products reach 2^60 at 2^53 (the exact range's design point) and beyond 1
WIDE_FREQS = np.array([1.0, SINUSOID.freqs[1], SINUSOID.freqs[17], SINUSOID.freqs[63], 3.0, 100.0, 128.0, 0.1])


@pytest.fixture
def big_positions():
    """posenc.LIMITS.max_abs_position raised to 2^53 for the test (restored after)."""
    saved = posenc.LIMITS.max_abs_position
    posenc.LIMITS.max_abs_position = TOP
    yield
    posenc.LIMITS.max_abs_position = saved


def test_regression_float32_row_at_1_7e12(big_positions):
    """The before-fault: at 1,700,000,000,123 the float32 sinusoid row was ~8.5e-5 (~1400 ulp)
    off, from the float64 rounding of coarse*w. Now within 1 float32 ulp of the exact row."""
    p = 1_700_000_000_123
    row = posenc.sinusoidal([p], 128)[0]
    sin, cos = exact_sin_cos([p], SINUSOID.freqs)
    exact = np.stack([sin[0], cos[0]], axis=1).reshape(-1)
    assert float32_ok(row, exact).all(), np.abs(row - exact).max()
    assert np.abs(row.astype(np.float64) - exact).max() < 1.2e-7 / 2  # one float32 ulp of 1.0 at most


@pytest.mark.parametrize("path", PATH_NAMES)
def test_adversarial_parts_each_within_one_ulp(path):
    """Coarse parts alone (multiples of 1024, mid = fine = 0: the row is that part's sin/cos
    untouched) and fractional positions (one direct sincos), at products closest to multiples
    of pi/2 for each frequency (continued fractions), up to 2^53 x 128 = 2^60."""
    kernels = path_kernels(path)
    if kernels is None:
        pytest.skip(f"this CPU cannot run the {path} path")
    for w in WIDE_FREQS:
        coarse = near_multiples_of_half_pi(w, 1024)
        fractional = [p + 0.5 for p in near_multiples_of_half_pi(w, 1, 2**51)][-12:]
        positions = np.array(coarse + fractional + [2.0**53, -(2.0**53), 2.0**53 - 1024, 0.5, -0.25])
        sin, cos = pair_rows(kernels, positions, [w])
        exact_s, exact_c = exact_sin_cos(positions, [w])
        assert_part_exact(sin, exact_s, (path, w, "sin"))
        assert_part_exact(cos, exact_c, (path, w, "cos"))


@pytest.mark.parametrize("path", PATH_NAMES)
def test_adversarial_integer_rows(path):
    """Integer positions (all three parts) near multiples of pi/2 for each frequency, and the
    edges 2^53 - 1, +-2^53, in both dtypes."""
    kernels = path_kernels(path)
    if kernels is None:
        pytest.skip(f"this CPU cannot run the {path} path")
    for w in WIDE_FREQS:
        positions = np.array(near_multiples_of_half_pi(w, 1)[-20:] + [TOP - 1, 1 - TOP, TOP, -TOP, TOP - 17],
                             dtype=np.float64)
        exact_s, exact_c = exact_sin_cos(positions, [w])
        for dtype in ("float64", "float32"):
            sin, cos = pair_rows(kernels, positions, [w], dtype=dtype)
            assert_rows_exact(sin, exact_s, what=(path, w, dtype, "sin"))
            assert_rows_exact(cos, exact_c, what=(path, w, dtype, "cos"))


@pytest.mark.parametrize("path", PATH_NAMES)
@SETTINGS
@given(data=st.data())
def test_random_positions_every_magnitude(path, data):
    """Random integers of magnitude 2^24..2^53 and fractional positions, Vaswani and Llama-3.1
    RoPE frequencies, float64 within ROW_BOUND (amplitude-scaled) and float32 within 1 ulp."""
    kernels = path_kernels(path)
    if kernels is None:
        pytest.skip(f"this CPU cannot run the {path} path")
    bits = data.draw(st.integers(24, 53), label="bits")
    p = data.draw(st.integers(2 ** (bits - 1), 2**bits), label="p") * data.draw(st.sampled_from([1, -1]))
    frac = data.draw(st.sampled_from([0.0, 0.5, 0.25, 0.125]), label="frac")
    position = float(p) + frac if abs(p) < 2**50 else float(p)
    freqs, amp = data.draw(st.sampled_from([(SINUSOID.freqs, 1.0), (ROPE_FREQS, ROPE_ATTENTION)]), label="spec")
    picked = np.array(data.draw(st.lists(st.sampled_from(list(freqs)), min_size=1, max_size=4, unique=True)))
    exact_s, exact_c = exact_sin_cos([position], picked)
    for dtype in ("float64", "float32"):
        sin, cos = pair_rows(kernels, [position], picked, amp=amp, dtype=dtype)
        assert_rows_exact(sin, amp * exact_s, amp, (position, dtype))
        assert_rows_exact(cos, amp * exact_c, amp, (position, dtype))


@SETTINGS
@given(bits=st.integers(24, 53), seed=st.integers(0, 2**32 - 1))
def test_public_api_rows_exact(big_positions, bits, seed):
    """posenc.sinusoidal and posenc.rope_cos_sin (the active path) on random positions of one
    magnitude, float64 and float32."""
    rng = np.random.default_rng(seed)
    positions = rng.integers(2 ** (bits - 1), 2**bits, 3, dtype=np.int64, endpoint=True)
    positions = positions * rng.choice([-1, 1], 3)
    exact_s, exact_c = exact_sin_cos(positions, SINUSOID.freqs)
    exact = np.stack([exact_s, exact_c], axis=2).reshape(len(positions), -1)
    for dtype in ("float64", "float32"):
        assert_rows_exact(posenc.sinusoidal(positions, 128, dtype=dtype), exact, what=("sinusoidal", dtype))
    exact_s, exact_c = exact_sin_cos(positions, ROPE_FREQS)
    for dtype in ("float64", "float32"):
        cos, sin = posenc.rope_cos_sin(positions, ROPE, dtype=dtype)
        assert_rows_exact(cos, ROPE_ATTENTION * exact_c, ROPE_ATTENTION, ("rope cos", dtype))
        assert_rows_exact(sin, ROPE_ATTENTION * exact_s, ROPE_ATTENTION, ("rope sin", dtype))


#: The public API on one path, in a process of its own (the path is chosen when the library loads).
API_CALLS = """
import sys
import numpy as np
import posenc
from posenc.kernels import active
posenc.LIMITS.max_abs_position = 2**53
positions = np.array([float.fromhex(p) for p in sys.argv[2].split(",")])
spec = posenc.RopeSpec(128, base=500000.0)
cos, sin = posenc.rope_cos_sin(positions, spec, dtype="float64")
np.savez(sys.argv[1], path=np.array(active.NAME), sinusoidal=posenc.sinusoidal(positions, 128, dtype="float64"),
         sinusoidal32=posenc.sinusoidal(positions, 128), rope_cos=cos, rope_sin=sin)
"""


@pytest.fixture(scope="module")
def api_positions() -> np.ndarray:
    hard = near_multiples_of_half_pi(1.0, 1)[-6:] + near_multiples_of_half_pi(1.0, 1024)[-4:]
    return np.array(hard + [1_700_000_000_123, TOP - 1, -TOP, TOP, 2.0**40 + 0.5, -123456789.25], dtype=np.float64)


@pytest.mark.parametrize("path", PATH_NAMES)
def test_public_api_on_each_path_in_its_own_process(tmp_path, api_positions, path):
    """posenc.sinusoidal and posenc.rope_cos_sin with POSENC_ISA=<path> (POSENC_NATIVE=0 for
    numba), adversarial and edge positions: exact rows, and the same bits on every path."""
    if path != "numba" and native.kernels_for(path) is None:
        pytest.skip(f"this CPU cannot run the {path} path")
    env = {**os.environ, **({"POSENC_NATIVE": "0"} if path == "numba" else {"POSENC_ISA": path})}
    out = tmp_path / "api.npz"
    subprocess.run([sys.executable, "-c", API_CALLS, str(out), ",".join(float(p).hex() for p in api_positions)],
                   env=env, check=True)
    with np.load(out) as saved:
        got = {name: saved[name] for name in saved.files}
    assert str(got["path"]) == path
    exact_s, exact_c = exact_sin_cos(api_positions, SINUSOID.freqs)
    exact = np.stack([exact_s, exact_c], axis=2).reshape(len(api_positions), -1)
    assert_rows_exact(got["sinusoidal"], exact, what=(path, "sinusoidal"))
    assert_rows_exact(got["sinusoidal32"], exact, what=(path, "sinusoidal32"))
    freqs, _ = posenc.rope_inv_freq(RopeSpec(128, base=500000.0))
    exact_s, exact_c = exact_sin_cos(api_positions, freqs)
    assert_rows_exact(got["rope_cos"], exact_c, what=(path, "rope cos"))
    assert_rows_exact(got["rope_sin"], exact_s, what=(path, "rope sin"))
    reference = pair_rows(nb_kernels, api_positions, SINUSOID.freqs)
    np.testing.assert_array_equal(got["sinusoidal"][:, 0::2], reference[0])  # bit for bit, numba's row kernel
    np.testing.assert_array_equal(got["sinusoidal"][:, 1::2], reference[1])


def test_beyond_the_exact_range_stays_close():
    """Products past 2^62 (far outside posenc's positions: the libm fallback on the two halves,
    lane by lane) are still sin/cos of the exact product to a few ulp, the same on every path."""
    positions = np.array([2.0**60 + 2.0**9, -(2.0**61) * 3, 2.0**70 + 2.0**18])
    freqs = [8.0, 1.0 / 3.0, 3.0]
    exact_s, exact_c = exact_sin_cos(positions, freqs)
    results = {name: pair_rows(path_kernels(name), positions, freqs) for name in PATH_NAMES if path_kernels(name)}
    for name, (sin, cos) in results.items():
        assert np.abs(sin - exact_s).max() <= 4 * 2.0**-53, name
        assert np.abs(cos - exact_c).max() <= 4 * 2.0**-53, name
        np.testing.assert_array_equal(sin, results["numba"][0], err_msg=name)
        np.testing.assert_array_equal(cos, results["numba"][1], err_msg=name)
