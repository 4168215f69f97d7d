"""The static ISA guard (native/tools/isa_guard.py) on every shipped binary, and proof that it
catches the two ways code a CPU may lack gets run outside dispatch: a load-time constructor in
an ISA file (the SIGILL of issue 22) and baseline code built with AVX enabled."""

from __future__ import annotations

import platform
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from binary_support import build

ROOT = Path(__file__).resolve().parents[1]
GUARD = ROOT / "native" / "tools" / "isa_guard.py"
NATIVE = ROOT / "service" / "posenc" / "native"
SHIPPED = [NATIVE / "libposenc.so", *NATIVE.glob("_posenc.*.so"), ROOT / "native" / "build" / "posenc-server",
           ROOT / "native" / "build" / "posenc-load", ROOT / "native" / "build" / "posenc-jitter"]

pytestmark = pytest.mark.skipif(platform.machine() != "x86_64", reason="the guard reads x86-64 instructions")


def guard(*binaries: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(GUARD), *map(str, binaries)], capture_output=True, text=True)


def test_shipped_binaries_run_nothing_isa_specific_outside_dispatch():
    build()
    missing = [p for p in SHIPPED if not p.exists()]
    assert not missing and len(SHIPPED) == 5, f"not built: {missing or 'the CPython binding'} (make install)"
    result = guard(*SHIPPED)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(SHIPPED)} binaries clean" in result.stdout


def compile_library(tmp_path: Path, name: str, source: str, *flags: str) -> Path:
    c_file = tmp_path / f"{name}.c"
    c_file.write_text(source)
    out = tmp_path / f"lib{name}.so"
    cc = (sysconfig.get_config_var("CC") or "cc").split()
    subprocess.run([*cc, "-O2", "-fPIC", "-shared", *flags, str(c_file), "-o", str(out)], check=True)
    return out


CONSTRUCTOR_IN_ISA_FILE = """
#pragma GCC target("avx2")
static double table[64];
__attribute__((constructor)) static void fill_table(void) {
    for (int i = 0; i < 64; i++) table[i] = i * 0.5;
}
double kernels_avx2_probe(int i) { return table[i & 63]; }
"""

BASELINE_BUILT_WITH_AVX = """
void scale(double *x, long n, double k) { for (long i = 0; i < n; i++) x[i] *= k; }
"""


def test_guard_names_a_constructor_that_runs_avx_at_load(tmp_path):
    # compiled as kernels_avx2.c: an ISA file, so only the .init_array rule can catch it
    lib = compile_library(tmp_path, "kernels_avx2", CONSTRUCTOR_IN_ISA_FILE)
    result = guard(lib)
    assert result.returncode == 1
    assert "fill_table runs at load (.init_array) and holds AVX-class instructions" in result.stdout


def test_guard_names_baseline_code_built_with_avx(tmp_path):
    lib = compile_library(tmp_path, "plain", BASELINE_BUILT_WITH_AVX, "-mavx2")
    result = guard(lib)
    assert result.returncode == 1
    assert re.search(r"libplain.so: scale \(in .*\) is not an ISA-specific kernel but holds AVX-class", result.stdout)


def test_guard_passes_the_same_code_built_for_the_baseline(tmp_path):
    assert guard(compile_library(tmp_path, "plain", BASELINE_BUILT_WITH_AVX)).returncode == 0
