"""Shared fixtures and the dtype-aware comparison every oracle test uses."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, settings

HERE = Path(__file__).parent
settings.register_profile("posenc", deadline=None, max_examples=60,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("ci", parent=settings.get_profile("posenc"), max_examples=40, derandomize=True)
settings.register_profile("thorough", parent=settings.get_profile("posenc"), max_examples=1000)
#: POSENC_HYPOTHESIS_PROFILE=thorough: 1000 examples a property (the default profile: 60), and the tests that
#: set their own budget (`by_profile`: fuzzers' seconds, schemathesis' examples) take their long one; for a
#: release or a night, not for `make test`. Without it: "ci" when CI is set, else "posenc".
HYPOTHESIS_PROFILE = os.environ.get("POSENC_HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "posenc")
settings.load_profile(HYPOTHESIS_PROFILE)


def by_profile(default, thorough):
    """A test's own budget (examples, seconds): `thorough` under the thorough profile, else `default`."""
    return thorough if HYPOTHESIS_PROFILE == "thorough" else default

DTYPES = ["float32", "float64", "float16", "bfloat16"]


def compile_c_test(tmp_path_factory, source: str, *flags: str) -> Path:
    """tests/c/<source> compiled against native/include as a C11 program, warnings as errors (skips the
    test without a C compiler); `flags` adds warnings or libraries."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler (cc/gcc/clang) on PATH")
    exe = tmp_path_factory.mktemp("c") / Path(source).stem
    subprocess.run([cc, "-std=c11", "-O2", "-Wall", "-Werror", f"-I{HERE.parent / 'native' / 'include'}",
                    str(HERE / "c" / source), *flags, "-o", str(exe)], check=True)
    return exe


@pytest.fixture(scope="session")
def goldens():
    """Values produced by torch 2.13 / transformers 5.24 (tests/golden/generate.py)."""
    return json.loads((HERE / "golden" / "reference_values.json").read_text())


def hf_config(name: str) -> dict:
    return json.loads((HERE / "fixtures" / "hf_configs" / f"{name}.json").read_text())


def ulp_tolerance(expected: np.ndarray, dtype, amplitude: float = 1.0, angle_max: float = 0.0) -> np.ndarray:
    """Allowed |actual - expected| for an output of `dtype` whose values live in [-amplitude, amplitude].

    Rounded types: 2 ulp of the value, never finer than 2 ulp at amplitude/2 (so 1.19e-7
    absolute for float32 in [-1, 1], the project's exactness target). float64: the float64
    angle itself carries |angle| * 2**-53 of rounding, so allow 4 of those plus 4 eps.
    """
    dt = np.dtype(dtype)
    if dt == np.float64:
        return np.full(np.shape(expected), 4 * 2.0**-52 * amplitude * (1.0 + angle_max))
    floor = 0.5 * amplitude
    magnitude = np.maximum(np.abs(np.asarray(expected, dtype=np.float64)), floor)
    if dt == np.dtype(ml_dtypes.bfloat16):
        spacing = 2.0 ** (np.floor(np.log2(magnitude)) - 7)
    else:
        spacing = np.spacing(magnitude.astype(dt)).astype(np.float64)
    return 2 * spacing


def assert_matches_oracle(actual, expected, dtype, amplitude=1.0, angle_max=0.0):
    actual = np.asarray(actual).astype(np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    err = np.abs(actual - expected)
    tol = ulp_tolerance(expected, dtype, amplitude, angle_max)
    bad = err > tol
    assert not bad.any(), (
        f"{int(bad.sum())} of {err.size} values off; worst {err.max():.3g} at {np.unravel_index(err.argmax(), err.shape)}"
        f" (tolerance there {tol.flat[err.argmax()]:.3g})"
    )
