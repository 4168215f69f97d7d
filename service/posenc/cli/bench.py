"""`posenc bench SUITE`: run a benchmark suite and print (optionally save) its markdown table."""

from __future__ import annotations

import importlib
from pathlib import Path

from ..bench import SUITES


def register(sub) -> None:
    p = sub.add_parser("bench", help="benchmarks with same-run baselines (markdown output)")
    suites = p.add_subparsers(dest="suite", required=True, metavar="SUITE")
    for name, summary in SUITES.items():
        sp = suites.add_parser(name, help=summary)
        importlib.import_module(f"posenc.bench.{name}").add_arguments(sp)
        sp.add_argument("--out", type=Path, help="also write the markdown table to this file")
        sp.set_defaults(handler=run)


def run(args) -> int:
    markdown = importlib.import_module(f"posenc.bench.{args.suite}").run(args)
    print(markdown)
    if args.out:
        args.out.write_text(markdown)
    return 0
