"""Run-time dispatch: CPU features, the path chosen at load, POSENC_ISA forcing and refusal,
POSENC_DEBUG, `posenc info`, the C entry points, and the numba fallback without the library."""

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from posenc import native
from posenc.native.library import EINVAL, ENOISA, Layout
from posenc.encodings import SinusoidalSpec

needs_native = pytest.mark.skipif(native.ACTIVE is None, reason=f"native library unavailable: {native.STATUS}")


def cpuinfo_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        pytest.skip("no /proc/cpuinfo to cross-check CPU features against")
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    pytest.skip("/proc/cpuinfo lists no flags (not x86)")


def python(code: str, **env) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter (the dispatcher decides once, at library load)."""
    environment = {k: v for k, v in os.environ.items() if k not in ("POSENC_ISA", "POSENC_DEBUG", "POSENC_NATIVE")}
    environment.update(env)
    return subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True, timeout=120,
                          check=False)


def best_path(flags: set[str]) -> str:
    if {"avx512f", "avx2", "fma"} <= flags:
        return "avx512"
    return "avx2" if {"avx2", "fma"} <= flags else "scalar"


@needs_native
def test_detected_features_agree_with_the_kernel():
    flags, detected = cpuinfo_flags(), native.cpu_features().split()
    for feature in ("avx", "avx2", "fma", "avx512f"):
        assert (feature in flags) == (feature in detected), feature
    assert ("os-ymm" in detected) == ("avx" in flags)  # Linux lists avx only when it saves YMM state


@needs_native
def test_default_is_the_best_path_this_cpu_runs():
    expected = best_path(cpuinfo_flags())
    result = python("from posenc import native; print(native.ACTIVE.name, native.available_isas())")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[0] == expected
    assert native.available_isas()[-1] == expected


@needs_native
def test_each_runnable_path_can_be_forced_and_is_reported():
    for isa in native.available_isas():
        result = python("from posenc.cli import main; main(['info'])", POSENC_ISA=isa, POSENC_DEBUG="1")
        assert result.returncode == 0, result.stderr
        assert f"native kernels: {isa} (" in result.stdout
        assert f"posenc: native kernels: {isa} path (POSENC_ISA={isa}" in result.stderr
        assert "cpu features: " in result.stdout


@needs_native
def test_forcing_a_path_this_cpu_cannot_run_raises_naming_posenc_isa():
    missing = [isa for isa in native.ISAS if isa not in native.available_isas()]
    if not missing:
        pytest.skip("this CPU runs every path, so none can be refused")
    result = python("import posenc.native", POSENC_ISA=missing[0])
    assert result.returncode != 0
    assert f"PosencError: POSENC_ISA: {missing[0]} asks for a path this CPU cannot run" in result.stderr
    assert "detected: " in result.stderr


@needs_native
def test_an_unknown_path_is_refused():
    result = python("import posenc.native", POSENC_ISA="sse9")
    assert result.returncode != 0
    assert "POSENC_ISA: sse9 is not a path; use one of avx512, avx2, scalar, auto" in result.stderr


def test_disabled_library_falls_back_to_numba_and_says_so():
    code = ("import numpy as np, posenc; from posenc import reference; from posenc.cli import main; main(['info']);"
            "p = np.arange(3000.0); print('err', abs(posenc.sinusoidal(p, 64) - reference.sinusoidal(p, 64)).max())")
    result = python(code, POSENC_NATIVE="0")
    assert result.returncode == 0, result.stderr
    assert "native kernels: unavailable, disabled by POSENC_NATIVE=0: numba kernels everywhere" in result.stdout
    assert float(result.stdout.split("err")[1]) < 1.2e-7


def test_missing_or_broken_library_is_reported_not_raised(tmp_path):
    library, status = native.load(tmp_path / "libposenc.so")
    assert library is None and status.startswith("not built")
    broken = tmp_path / "libbroken.so"
    broken.write_bytes(b"not an ELF file")
    library, status = native.load(broken)
    assert library is None and status.startswith("failed to load libbroken.so")


@needs_native
def test_c_entry_points_route_through_the_active_path():
    lib = native.LIBRARY
    spec = SinusoidalSpec(16)
    plan = spec.column_plan()
    positions, amp = np.arange(50.0), np.ones(spec.n_sin)
    out = np.empty((50, 16))
    layout = Layout(plan.row_stride, plan.sin_base, plan.cos_base, plan.n_cos, 1, 0)
    args = [positions.ctypes.data, 50, spec.freqs.ctypes.data, amp.ctypes.data, spec.n_sin, ctypes.byref(layout)]
    assert lib.posenc_sincos_rows(*args, out.ctypes.data, 1) == 0
    expected = np.empty_like(out)
    native.ACTIVE.sincos_rows(positions, spec.freqs, amp, expected.reshape(-1), plan, 0, 50)
    np.testing.assert_array_equal(out, expected)
    assert lib.posenc_sincos_rows(*args, out.ctypes.data, 9) == EINVAL  # no such dtype
    args[5] = ctypes.byref(Layout(16, 0, 8, spec.n_sin + 1, 0, 0))  # more cos than sin columns
    assert lib.posenc_sincos_rows(*args, out.ctypes.data, 1) == EINVAL


@needs_native
def test_without_a_path_every_entry_point_returns_enoisa():
    missing = [isa for isa in native.ISAS if isa not in native.available_isas()]
    if not missing:
        pytest.skip("this CPU runs every path, so none can be refused")
    code = (f"import ctypes; lib = ctypes.CDLL({str(native.LIBRARY_PATH)!r}); lib.posenc_isa.restype = ctypes.c_char_p;"
            "z = ctypes.c_int64(0); print(lib.posenc_isa(), lib.posenc_sincos_rows(None, z, None, None, z, None, None, 0),"
            " lib.posenc_gather_rows(None, z, z, None, z, None, None))")  # no posenc import: it would raise
    result = python(code, POSENC_ISA=missing[0])
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["None", str(ENOISA), str(ENOISA)]
