"""`posenc bench SUITE`: run a benchmark suite and print its markdown table (optionally into a file or\nbetween its markers in a page: docs/benchmarks.md)."""

from __future__ import annotations

import importlib
from pathlib import Path

from ..bench import SUITES
from ..bench.readme import write_into


def register(sub) -> None:
    p = sub.add_parser("bench", help="benchmarks with same-run baselines (markdown output)")
    suites = p.add_subparsers(dest="suite", required=True, metavar="SUITE")
    for name, summary in SUITES.items():
        sp = suites.add_parser(name, help=summary)
        importlib.import_module(f"posenc.bench.{name}").add_arguments(sp)
        sp.add_argument("--out", type=Path, help="also write the markdown table to this file")
        sp.add_argument("--readme", type=Path, help=f"also put it into this file between "
                        f"'<!-- bench: {name} -->' and '<!-- /bench: {name} -->'")
        sp.set_defaults(handler=run)


def run(args) -> int:
    markdown = importlib.import_module(f"posenc.bench.{args.suite}").run(args)
    print(markdown)
    if args.out:
        args.out.write_text(markdown)
    if args.readme:
        write_into(args.readme, args.suite, markdown)
        print(f"updated the {args.suite} table in {args.readme}")
    return 0
