"""`posenc lab [--budget smoke|documented] [--schemes a,b] [--tasks lm,copy] [--seed N] [--jobs N] [--out FILE]`.

Train tiny decoder-only Transformers on synthetic tasks at one length and evaluate them at up to
8 times it (perplexity on a Markov source, token accuracy on a copy task, attention entropy on
both), for every positional scheme, each signal taken from posenc. Deterministic: the same seed
gives the same numbers on a rerun on the same machine. Writes the results (configuration,
environment, numbers) as JSON and prints each task's headline metric against length. Needs torch
(`pip install 'posenc[torch]'`). `posenc plot lab --results FILE` draws the file.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ..errors import PosencError


def register(sub) -> None:
    from ..lab.budgets import BUDGETS
    from ..lab.schemes import SCHEMES

    p = sub.add_parser("lab", help="extrapolation experiments: train short, evaluate long, every scheme",
                       description=__doc__.split("\n\n", 1)[1])
    p.add_argument("--budget", choices=list(BUDGETS), default="smoke",
                   help="smoke: about a minute on two cores; documented: the docs' size, tens of minutes")
    p.add_argument("--schemes", help=f"comma-separated subset of {', '.join(SCHEMES)} (default: all)")
    p.add_argument("--tasks", help="comma-separated subset of lm, copy (default: both)")
    p.add_argument("--seed", type=int, default=0, help="every seed of the run derives from it (default 0)")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="train N models at once, a process each (the same numbers; default 1)")
    p.add_argument("--out", default="lab-results.json", help="the results file (default lab-results.json)")
    p.set_defaults(handler=run)


def _names(value: str | None, field: str) -> list[str] | None:
    if value is None:
        return None
    names = [name.strip() for name in value.split(",") if name.strip()]
    if not names:
        raise PosencError(field, "names no scheme or task; give a comma-separated list")
    return names


def _check_writable(path: str) -> None:
    """Before the run, not after minutes of it: the file's folder exists and takes files."""
    folder = Path(path).resolve().parent
    if not folder.is_dir() or not os.access(folder, os.W_OK) or Path(path).is_dir():
        raise PosencError("out", f"cannot write {path}: {folder} is not a writable folder"
                          if not Path(path).is_dir() else f"cannot write {path}: it is a folder")


def run(args) -> int:
    from ..lab import require_torch

    require_torch()
    _check_writable(args.out)
    from ..lab import results
    from ..lab.run import run_lab

    doc = run_lab(args.budget, schemes=_names(args.schemes, "schemes"), tasks=_names(args.tasks, "tasks"),
                  seed=args.seed, progress=True, jobs=args.jobs)
    results.write(doc, args.out)
    print(results.summary(doc))
    print(f"wrote {args.out} ({doc['timing_seconds']['total']:.0f} s)", file=sys.stderr)
    return 0
