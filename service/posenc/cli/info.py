"""`posenc info`: versions, limits and which compute paths this machine runs."""

from __future__ import annotations

from .. import __version__


def register(sub) -> None:
    p = sub.add_parser("info", help="versions, CPU features, chosen kernel paths, limits")
    p.add_argument("--json", action="store_true", help="one JSON object (the same facts, machine-readable)")
    p.set_defaults(handler=run)


def native_line() -> str:
    """Which path runs: the dispatcher's choice, or why the numba kernels run instead."""
    from .. import native

    if native.ACTIVE is None:
        return f"unavailable, {native.STATUS}: numba kernels everywhere"
    calls = ("every call, through the CPython binding" if native.BINDING is not None
             else native.STATUS.partition("; ")[2])
    return f"{native.ACTIVE.name} (runnable here: {', '.join(native.available_isas())}; {calls})"


def lines() -> list[tuple[str, str]]:
    """The rows `posenc info` prints. What they need is imported here, not with the module: besides
    keeping `posenc --help` quick, it makes a POSENC_ISA the CPU cannot run a PosencError that
    `main` reports (`posenc: error: POSENC_ISA: ...`, exit 2)."""
    import platform
    from importlib.metadata import version

    import numpy as np

    from .. import native
    from ..kernels.parallel import threads
    from ..limits import LIMITS

    return [
        ("posenc", __version__),
        ("python", platform.python_version()),
        ("numpy", np.__version__),
        ("numba", version("numba")),  # not imported: the native kernels run without it
        ("machine", f"{platform.machine()} {platform.processor() or ''}".strip()),
        ("cpu features", native.cpu_features() or "unknown (native library not loaded)"),
        ("native kernels", native_line()),
        ("kernel threads", str(threads())),
        ("max output bytes", str(LIMITS.max_output_bytes)),
        ("max |position|", str(LIMITS.max_abs_position)),
        ("max dim", str(LIMITS.max_dim)),
    ]


def facts() -> dict:
    """`posenc info --json`: the same facts as the lines, typed (lists and integers, not text)."""
    from .. import native
    from ..kernels.parallel import threads

    out = {key.replace(" ", "_").replace("|", "").replace("max_position", "max_abs_position"): value
           for key, value in lines()}
    out.update(native_kernels=native.ACTIVE.name if native.ACTIVE else None,
               native_status=native.STATUS, runnable_paths=native.available_isas(),
               cpu_features=native.cpu_features().split(), kernel_threads=threads(),
               max_output_bytes=int(out["max_output_bytes"]), max_abs_position=int(out["max_abs_position"]),
               max_dim=int(out["max_dim"]))
    return out


def run(args) -> int:
    if args.json:
        import json

        print(json.dumps(facts()))
        return 0
    for key, value in lines():
        print(f"{key:>18}: {value}")
    return 0
