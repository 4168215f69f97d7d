"""The lab's results file: one JSON document with everything a rerun needs and what it measured.

    {"format": "posenc-lab/1",
     "configuration": {"budget": sizes and schedules, "seed", "tasks": {task: {"task", "plan", "geometry",
                       "schemes": {name: posenc's specs for training and evaluation, ALiBi slopes, ...}}}},
     "results": [{"task", "trained_as", "training": {loss curve}, "evaluations": {scheme: [point per length]}}],
     "environment": {versions of posenc, torch, numpy, Python; machine, CPU, torch's ISA, threads},
     "timing_seconds": {"total", "per_model"}}

"configuration" and "results" are the same on every rerun with the same seed on the same machine
and versions (`reproducible_part`); "environment" and "timing_seconds" describe the run. Kernels
differ between CPUs (AVX2, AVX-512) and torch versions, so numbers from another machine agree to
within training noise, not to the bit: the environment says which it was.
"""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
from pathlib import Path

from ..errors import PosencError
from .metrics import HEADLINE

FORMAT = "posenc-lab/1"
#: The documented-size run that docs/lab.md reports (shipped with the package: `posenc pick` cites its rows,
#: the explorer's Lab view draws it).
DOCUMENTED = Path(__file__).with_name("documented.json")
#: The keys whose values are identical on a rerun (same seed, machine and versions).
REPRODUCIBLE = ("format", "configuration", "results")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _posenc_commit() -> str | None:
    """The git commit of the posenc source that ran (None outside a checkout)."""
    try:
        done = subprocess.run(["git", "-C", str(Path(__file__).parent), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def environment(threads: int) -> dict:
    import numpy
    import torch

    from .. import __version__

    return {"posenc": __version__, "posenc_commit": _posenc_commit(), "torch": torch.__version__,
            "numpy": numpy.__version__, "python": platform.python_version(), "platform": platform.platform(),
            "machine": platform.machine(), "cpu": _cpu_model(), "cpu_count": os.cpu_count(),
            "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(), "torch_threads": threads,
            "deterministic_algorithms": True}


def document(budget, seed: int, configurations: dict, runs: list[dict], timing: dict, started_in: dict) -> dict:
    """The results document; `started_in` is `environment()` taken when the run started (the checkout's
    commit then is the code that ran, whatever was committed during a run of tens of minutes)."""
    return {"format": FORMAT,
            "configuration": {"budget": budget.to_dict(), "seed": seed, "tasks": configurations},
            "results": runs, "environment": started_in, "timing_seconds": timing}


def reproducible_part(doc: dict) -> dict:
    return {key: doc[key] for key in REPRODUCIBLE}


def _finite(value):
    """NaN and infinities (a diverged run) as None: the file stays strict JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def dumps(doc: dict) -> str:
    return json.dumps(_finite(doc), indent=1, allow_nan=False) + "\n"


def write(doc: dict, path: str | Path) -> None:
    Path(path).write_text(dumps(doc))


def read(path: str | Path) -> dict:
    """A results file, checked to be one (PosencError naming the problem otherwise)."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PosencError("results", f"cannot read {path}: {exc}") from None
    return checked(doc, str(path))


def checked(doc, name: str = "") -> dict:
    """`doc` if it says it is a results file (its "format"); PosencError("results") otherwise. `name`: what
    the message calls it (a path), or nothing where the field says it (HTTP, the explorer)."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise PosencError("results", f"{name + ' ' if name else ''}is not a posenc lab results file "
                          f"(format {FORMAT!r})")
    return doc


def documented() -> dict:
    """The documented-size run shipped with posenc (docs/lab.md's tables)."""
    return read(DOCUMENTED)


def rows(doc: dict) -> list[tuple[str, str, list[dict]]]:
    """(task, scheme, points) for every evaluation of the document, in its order."""
    try:
        return [(run["task"], scheme, points) for run in doc["results"]
                for scheme, points in run["evaluations"].items()]
    except (KeyError, TypeError, AttributeError):
        raise PosencError("results", "has no results[].evaluations (not a posenc lab results file?)") from None


def summary(doc: dict) -> str:
    """The headline metric of every scheme at every length, one table per task, as text."""
    lines = []
    for task in doc["configuration"]["tasks"]:
        metric, higher_better, chance = HEADLINE[task]
        vocab = doc["configuration"]["tasks"][task]["task"]["vocab"]
        table = [(scheme, points) for name, scheme, points in rows(doc) if name == task]
        lengths = [p["length"] for p in table[0][1]]
        lines.append(f"{task}: {metric} ({'higher' if higher_better else 'lower'} is better; "
                     f"chance {chance(vocab):.3g}) at length")
        lines.append(f"  {'scheme':<14}" + "".join(f"{length:>9}" for length in lengths))
        for scheme, points in table:
            cells = "".join(f"{p[metric]:>9.3f}" if p[metric] is not None else f"{'-':>9}" for p in points)
            lines.append(f"  {scheme:<14}{cells}")
        if task == "lm":
            floor = "".join(f"{p['source_perplexity']:>9.3f}" for p in table[0][1])
            lines.append(f"  {'(source)':<14}{floor}")
    return "\n".join(lines)
