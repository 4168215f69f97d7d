"""`posenc info`: versions, limits and which compute paths this machine runs."""

from __future__ import annotations

from .. import __version__


def register(sub) -> None:
    p = sub.add_parser("info", help="versions, CPU features, chosen kernel paths, limits")
    p.set_defaults(handler=run)


def native_line() -> str:
    """Which path runs: the dispatcher's choice, or why the numba kernels run instead."""
    from .. import native

    if native.ACTIVE is None:
        return f"unavailable, {native.STATUS}: numba kernels everywhere"
    return (f"{native.ACTIVE.name} (runnable here: {', '.join(native.available_isas())}; "
            f"numba below {native.MIN_NATIVE_ELEMENTS} elements per call)")


def lines() -> list[tuple[str, str]]:
    """The rows `posenc info` prints. What they need is imported here, not with the module: besides
    keeping `posenc --help` quick, it makes a POSENC_ISA the CPU cannot run a PosencError that
    `main` reports (`posenc: error: POSENC_ISA: ...`, exit 2)."""
    import platform

    import numba
    import numpy as np

    from .. import native
    from ..kernels import threads
    from ..limits import LIMITS

    return [
        ("posenc", __version__),
        ("python", platform.python_version()),
        ("numpy", np.__version__),
        ("numba", numba.__version__),
        ("machine", f"{platform.machine()} {platform.processor() or ''}".strip()),
        ("cpu features", native.cpu_features() or "unknown (native library not loaded)"),
        ("native kernels", native_line()),
        ("kernel threads", str(threads())),
        ("max output bytes", str(LIMITS.max_output_bytes)),
        ("max |position|", str(LIMITS.max_abs_position)),
        ("max dim", str(LIMITS.max_dim)),
    ]


def run(args) -> int:
    for key, value in lines():
        print(f"{key:>18}: {value}")
    return 0
