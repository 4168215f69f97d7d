"""The one binding to the native SIMD core (libposenc, built from native/ by setup.py).

At import the library is loaded and its dispatcher has already picked a path (scalar,
avx2, avx512: the best this CPU runs, or the one POSENC_ISA names). `ACTIVE` is that
path's kernels through ctypes (any path's: `kernels_for`, for tests and benchmarks), and
`BINDING` the CPython binding (native/python/_posenc.c) that calls the active path for jobs
of any size: what `posenc.kernels.active` runs. Both are None when the library is
unavailable (not built, POSENC_NATIVE=0, stale build), `BINDING` also when only the
binding is missing (no Python headers at build time): the package then computes on the
numba kernels and `STATUS` says why.
Forcing a path the CPU cannot run is an error, not a silent fallback: importing raises
PosencError naming POSENC_ISA.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import PosencError
from .library import ABI_VERSION, NativeKernels, kernels_from_pointer, open_library

LIBRARY_PATH = Path(__file__).with_name("libposenc.so")
ISAS = ("scalar", "avx2", "avx512")


def load(path: Path):
    """(library or None, status line): the path the dispatcher chose, or why there is none."""
    if os.environ.get("POSENC_NATIVE", "1") == "0":
        return None, "disabled by POSENC_NATIVE=0"
    if not path.exists():
        return None, f"not built ({path.name} missing: run `make install`)"
    try:
        lib = open_library(path)
    except (OSError, AttributeError) as exc:
        return None, f"failed to load {path.name}: {exc}"
    if lib.posenc_abi_version() != ABI_VERSION:
        return None, f"stale build (ABI {lib.posenc_abi_version()}, expected {ABI_VERSION}: run `make install`)"
    if not lib.posenc_isa():
        raise PosencError("POSENC_ISA", lib.posenc_dispatch_error().decode().removeprefix("POSENC_ISA="))
    return lib, lib.posenc_isa().decode()


def load_binding(library):
    """(the CPython binding or None, why not: "" when loaded or when there is no `library`, whose
    own STATUS says why) beside the loaded `library`."""
    if library is None:
        return None, ""
    try:
        from . import _posenc
    except ImportError as exc:
        return None, f"binding not built ({exc}): computations run on numba"
    if _posenc.ABI_VERSION != ABI_VERSION:
        return None, f"stale binding (ABI {_posenc.ABI_VERSION}, expected {ABI_VERSION}: run `make install`)"
    return _posenc, ""


#: The loaded ctypes library (None without one) and a line saying which path runs or why none.
LIBRARY, STATUS = load(LIBRARY_PATH)
#: The active path's kernels through ctypes, or None (numba everywhere).
ACTIVE: NativeKernels | None = kernels_from_pointer(LIBRARY.posenc_active_kernels(), LIBRARY) if LIBRARY else None
#: The CPython binding of the active path (posenc.kernels.active's kernels), or None.
BINDING, _binding_missing = load_binding(LIBRARY)
if _binding_missing:
    STATUS = f"{STATUS}; {_binding_missing}"


def kernels_for(isa: str) -> NativeKernels | None:
    """A specific path's kernels (tests, benchmarks), or None if unavailable on this CPU."""
    if LIBRARY is None:
        return None
    return kernels_from_pointer(LIBRARY.posenc_kernels_for(isa.encode()), LIBRARY)


def available_isas() -> list[str]:
    return [isa for isa in ISAS if kernels_for(isa) is not None]


def cpu_features() -> str:
    """CPU features the dispatcher saw (from the library), or "" without it."""
    return LIBRARY.posenc_cpu_features().decode() if LIBRARY else ""


__all__ = ["ACTIVE", "BINDING", "ISAS", "LIBRARY", "LIBRARY_PATH", "STATUS", "NativeKernels",
           "available_isas", "cpu_features", "kernels_for", "load", "load_binding"]
