"""A CLI that starts at once: `import posenc`, `posenc --help`, `--version` and every subcommand's
`--help` load none of numpy, numba, ml_dtypes, the HTTP stack, matplotlib or torch.

Each check runs in a fresh interpreter, since this one has long imported all of them. What
`sys.modules` holds afterwards is the assertion that holds on any machine; wall-clock time is
only a loose sanity bound here (docs/startup.md has the measured figures).
"""

import argparse
import ast
import importlib
import importlib.metadata
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

import posenc
import posenc.shm
from posenc import native
from posenc.cli import build_parser
from posenc.cli.bench import LazyParser

#: Top-level packages a startup must not import (the cost of each is 0.1 s to seconds).
HEAVY = ("numpy", "numba", "llvmlite", "ml_dtypes", "fastapi", "starlette", "uvicorn", "httpx", "matplotlib",
         "torch", "safetensors")
#: Prints, last, the heavy modules that are loaded: `python -c PROBE_CLI ARGS...` runs `posenc ARGS...`.
REPORT = f"print('\\nLOADED', *sorted(m for m in sys.modules if m.partition('.')[0] in {HEAVY!r}))"
PROBE_CLI = f"""import sys
from posenc.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
{REPORT}"""
#: `posenc` as a user runs it: the console script next to this interpreter.
POSENC = Path(sys.executable).with_name("posenc")


def python(code: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter, with POSENC_ISA as the test says (unset by default)."""
    environment = {k: v for k, v in os.environ.items() if k != "POSENC_ISA"} | env
    return subprocess.run([sys.executable, "-c", code, *args], env=environment, capture_output=True, text=True,
                          timeout=120, check=False)


def loaded(result: subprocess.CompletedProcess) -> list[str]:
    assert result.returncode == 0, result.stderr
    return result.stdout.rsplit("\nLOADED", 1)[1].split()


def help_commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every subcommand path (`("table", "build")`, ...) whose parser is defined up front. A bench
    suite's parser (LazyParser) is left out: its arguments live in the suite's module, which its
    `--help` imports by design."""
    commands = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if not isinstance(sub, LazyParser):
                    commands += [(*prefix, name), *help_commands(sub, (*prefix, name))]
    return commands


HELP = [("--help",), ("--version",), *((*command, "--help") for command in help_commands(build_parser()))]


def test_every_subcommand_is_enumerated():
    commands = {argv[:-1] for argv in HELP}
    assert {("serve",), ("table",), ("bench",), ("plot",), ("info",), ("table", "build"), ("table", "rm")} <= commands


def test_import_posenc_loads_nothing_heavy():
    assert loaded(python(f"import sys, posenc\n{REPORT}")) == []


def test_light_names_stay_light():
    """The first use pays only for what it uses: the error type, limits and version need no numpy."""
    code = f"import sys, posenc\nposenc.PosencError, posenc.LIMITS, posenc.__version__\n{REPORT}"
    assert loaded(python(code)) == []


@pytest.mark.parametrize("argv", HELP, ids=" ".join)
def test_help_and_version_load_nothing_heavy(argv):
    assert loaded(python(PROBE_CLI, *argv)) == []


def test_a_bench_suite_defines_its_arguments_when_chosen():
    result = python(PROBE_CLI, "bench", "torch", "--help")
    assert "--no-accuracy" in result.stdout and "--readme README" in result.stdout, result.stdout + result.stderr


def test_version_agrees_with_the_installed_metadata():
    version = importlib.metadata.version("posenc")
    assert python("import posenc; print(posenc.__version__)").stdout == f"{version}\n"
    result = python(PROBE_CLI, "--version")
    assert result.stdout.startswith(f"posenc {version}\n"), result.stdout + result.stderr


def test_every_public_name_resolves():
    """`__all__`, what `dir()` lists (submodules included) and `from posenc import *` all resolve."""
    code = ("import posenc\n"
            "assert set(posenc.__all__) <= set(dir(posenc))\n"
            "missing = [n for n in dir(posenc) if getattr(posenc, n, None) is None]\n"
            "assert not missing, missing\n"
            "namespace = {}\n"
            "exec('from posenc import *', namespace)\n"
            "assert set(posenc.__all__) <= set(namespace)")
    result = python(code)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("package", [posenc, posenc.shm], ids=lambda package: package.__name__)
def test_type_checkers_see_the_names_that_run(package):
    """The `if TYPE_CHECKING:` imports of a lazy package name exactly its `__all__`, each from the
    module its `__getattr__` imports it from."""
    tree = ast.parse(Path(package.__file__).read_text())
    block = next(node for node in tree.body
                 if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING")
    seen = {alias.name: f"{package.__name__}.{node.module}" for node in block.body for alias in node.names}
    assert sorted(seen) == sorted(package.__all__)
    for name, module in seen.items():
        assert getattr(package, name) is getattr(importlib.import_module(module), name), name


def test_unknown_names_are_attribute_errors():
    result = python("import posenc\nprint(hasattr(posenc, 'no_such_name'))")
    assert result.stdout == "False\n", result.stderr


@pytest.mark.skipif(native.LIBRARY is None, reason=f"native library unavailable: {native.STATUS}")
def test_a_refused_posenc_isa_surfaces_at_first_use_and_info_reports_it():
    refused = "POSENC_ISA: sse9 is not a path"
    assert python("import posenc", POSENC_ISA="sse9").returncode == 0
    assert loaded(python(PROBE_CLI, "--help", POSENC_ISA="sse9")) == []
    first_use = python("import posenc; posenc.sinusoidal([0], 8)", POSENC_ISA="sse9")
    assert first_use.returncode != 0 and f"PosencError: {refused}" in first_use.stderr
    info = python("import sys\nfrom posenc.cli import main\nsys.exit(main(['info']))", POSENC_ISA="sse9")
    assert info.returncode == 2 and info.stderr.startswith(f"posenc: error: {refused}"), info.stderr
    assert "Traceback" not in info.stderr


def median_seconds(argv: list[str], runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True, timeout=60)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


@pytest.mark.skipif(not POSENC.exists(), reason="the posenc console script is not installed next to python")
def test_startup_is_quick():
    """A loose bound (a busy 2-core VM measures ~0.2 s for `posenc --help`; it took ~5 s when
    every module loaded eagerly)."""
    assert median_seconds([str(POSENC), "--help"]) < 1.0
    assert median_seconds([sys.executable, "-c", "import posenc"]) < 1.0
