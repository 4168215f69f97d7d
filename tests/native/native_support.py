"""Fixtures for the native-core tests (load with `pytest_plugins = ["native_support"]`).

`kernels` runs a test once per code path: scalar, AVX2, AVX-512 emulated by SIMDe (the
same kernels_avx512.c built a second time, against SIMDe's portable intrinsics), and
native AVX-512. A path this machine cannot run is skipped with the reason printed.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import sysconfig
from pathlib import Path

import pytest

from posenc import native
from posenc.native.library import kernels_from_symbol

ROOT = Path(__file__).resolve().parents[2]
NATIVE_SRC = ROOT / "native" / "src"
PATHS = ["scalar", "avx2", "avx512-simde", "avx512"]


def _compiler() -> list[str]:
    return (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()


def _simde_flags(include: str) -> list[str]:
    # SIMDe implements each AVX-512 intrinsic with the widest native vectors the compiler
    # may use: AVX2 where this CPU has it (faster tests), plain SSE2 otherwise.
    isa = ["-mavx2", "-mfma"] if "avx2" in native.cpu_features().split() else []
    # -ffp-contract=off as setup.py: FMA only where the kernels ask for it (bitwise equal paths)
    return ["-std=c11", "-O2", "-fPIC", "-shared", "-Wall", "-Wno-psabi", "-ffp-contract=off", "-DPOSENC_SIMDE",
            f"-I{include}", f"-I{ROOT / 'native' / 'include'}", f"-I{NATIVE_SRC}", *isa]


def build_simde_library(out_dir: Path, source: str = "kernels_avx512.c") -> Path:
    """Compile native/src/`source` (kernels_avx512.c, json_f32_avx512.c) against SIMDe into out_dir
    (cached by a hash of sources and flags)."""
    simde_py = pytest.importorskip("simde_py", reason="simde-py (test extra) provides the SIMDe headers")
    command = _compiler() + _simde_flags(simde_py.get_include())
    digest = hashlib.sha256(" ".join(command + [source]).encode())
    for path in sorted(NATIVE_SRC.glob("*.[ch]")) + [ROOT / "native" / "include" / "posenc.h"]:
        digest.update(path.read_bytes())
    target = out_dir / f"libposenc_{Path(source).stem}_simde_{digest.hexdigest()[:16]}.so"
    if not target.exists():
        partial = target.with_suffix(f".{os.getpid()}.tmp")
        result = subprocess.run(command + [str(NATIVE_SRC / source), "-o", str(partial), "-lm"],
                                capture_output=True, text=True, check=False)
        if result.returncode != 0:
            pytest.fail(f"building the SIMDe-emulated {source} failed:\n{result.stderr}")
        os.replace(partial, target)
    return target


def simde_out_dir(request, tmp_path_factory) -> Path:
    """Where the SIMDe builds are cached: pytest's cache, else a session temporary directory."""
    if getattr(request.config, "cache", None) is not None:
        return Path(request.config.cache.mkdir("posenc-native"))
    return Path(tmp_path_factory.mktemp("posenc-native"))


@pytest.fixture(scope="session")
def simde_avx512(request, tmp_path_factory):
    path = build_simde_library(simde_out_dir(request, tmp_path_factory))
    return kernels_from_symbol(ctypes.CDLL(str(path)), "posenc_kernels_avx512_simde")


@pytest.fixture(params=PATHS)
def kernels(request):
    """One code path's NativeKernels; skips (with the reason) what this machine cannot run."""
    if native.ACTIVE is None:
        pytest.skip(f"native library unavailable: {native.STATUS}")
    if request.param == "avx512-simde":
        return request.getfixturevalue("simde_avx512")
    found = native.kernels_for(request.param)
    if found is None:
        pytest.skip(f"this CPU cannot run the {request.param} path (detected: {native.cpu_features()})")
    return found
