"""Run a bench suite once per native kernel path this CPU runs, and join the results into one report.

libposenc picks its path (avx512, avx2, scalar) once, when it is loaded, for every kernel in it
(rows, CRC-32C, the JSON writer), and POSENC_ISA forces one: so each path runs in its own
process, `posenc bench SUITE ... --isa PATH` with POSENC_ISA=PATH, on the same arguments. The
reports are then joined: the k-th table of every path's report becomes one table whose first
column names the path; text lines every path printed alike appear once, and each run of lines
that differ becomes a list with one item a path (its lines of the run, joined). Suites whose rows already compare the paths in one process (`native`,
`json`: `native.kernels_for` / `json_f32_by` pick a path per call) do not need this.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from ..cli.options import is_hidden
from ..errors import PosencError

#: Suites that go through the library's active path (the public API, shm publishing): one process a path.
PER_PATH_SUITES = ("tables", "shm")
ISA_ENV = "POSENC_ISA"
ALL = "all"


def runnable_paths() -> list[str]:
    """The library's paths this CPU runs, fastest first ([] without the library: numba only)."""
    from .. import native

    return list(reversed(native.available_isas()))


def requested_paths(isa: str) -> list[str]:
    """`--isa` as a list of paths: "all" = every runnable one; else comma-separated names, each checked."""
    runnable = runnable_paths()
    if isa == ALL:
        return runnable
    paths = [name.strip() for name in isa.split(",") if name.strip()]
    for name in paths:
        if name not in runnable:
            raise PosencError("isa", f"{name!r} is not a path this CPU runs; it runs: {', '.join(runnable) or 'none'}")
    return paths


def on_this_path(paths: list[str]) -> bool:
    """Whether this process already runs the one path asked for (a per-path child, or POSENC_ISA set
    by hand): then the suite runs here, with no child process."""
    return not paths or (len(paths) == 1 and os.environ.get(ISA_ENV) == paths[0])


def suite_argv(parser: argparse.ArgumentParser, args: argparse.Namespace, own: set[str]) -> list[str]:
    """The command-line options of `args` for the actions whose dest is in `own` (the suite's
    own arguments), as given or defaulted: a child then runs the same measurement."""
    argv = []
    for action in parser._actions:
        if action.dest not in own or not action.option_strings or is_hidden(action):  # an old spelling's
            continue  # value is the new name's: given once
        value = getattr(args, action.dest)
        if action.nargs == 0:  # store_true / store_false: the flag when it differs from its default
            if value != action.default:
                argv.append(action.option_strings[0])
        elif value is not None:
            values = value if isinstance(value, (list, tuple)) else [value]
            argv += [action.option_strings[0], *map(str, values)]
    return argv


def run_per_path(suite: str, argv: list[str], paths: list[str]) -> str:
    """`posenc bench SUITE argv --isa PATH` under POSENC_ISA=PATH for each path; the joined report."""
    reports = {}
    for path in paths:
        command = [sys.executable, "-m", "posenc.cli", "bench", suite, *argv, "--isa", path]
        done = subprocess.run(command, env={**os.environ, ISA_ENV: path}, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise PosencError("bench", f"{suite} on the {path} path failed ({done.returncode}): "
                              f"{done.stderr.strip()[-2000:]}")
        reports[path] = done.stdout
    return join_reports(reports)


def _blocks(report: str) -> list[list[str]]:
    """A report as blocks: each markdown table (its consecutive `|` lines) one block, each other line one."""
    blocks: list[list[str]] = []
    for line in report.strip().splitlines():
        if line.startswith("|") and blocks and blocks[-1][0].startswith("|"):
            blocks[-1].append(line)
        else:
            blocks.append([line])
    return blocks


def join_reports(reports: dict[str, str]) -> str:
    """One report from each path's (see the module docstring); the reports must have the same shape,
    which the same suite on the same arguments gives."""
    shapes = {path: _blocks(report) for path, report in reports.items()}
    first = next(iter(shapes.values()))
    if any(len(blocks) != len(first) for blocks in shapes.values()):
        raise PosencError("bench", "the paths' reports differ in shape: " + ", ".join(
            f"{path}: {len(blocks)} blocks" for path, blocks in shapes.items()))
    out: list[str] = []
    differing: list[int] = []  # a run of text lines that differ between paths: one list item a path

    def end_run() -> None:
        if differing:
            out.extend([f"- {path}: " + " ".join(blocks[k][0] for k in differing) for path, blocks in shapes.items()]
                       + [""])
            differing.clear()

    for k, block in enumerate(first):
        if block[0].startswith("|"):
            end_run()
            out += ["| path " + block[0], "|---" + block[1]]
            for path, blocks in shapes.items():
                out += [f"| {path} " + row for row in blocks[k][2:]]
        elif all(blocks[k] == block for blocks in shapes.values()):
            end_run()
            out += block
        else:
            differing.append(k)
    end_run()
    text = "\n".join(out).strip()
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    return text + "\n"
