"""`posenc bench SUITE`: run a benchmark suite and print its markdown table (optionally into a file or\nbetween its markers in a page: docs/benchmarks.md)."""

from __future__ import annotations

import argparse
import functools
import importlib
from collections.abc import Callable
from pathlib import Path

from ..bench import SUITES
from ..bench.readme import write_into


class LazyParser(argparse.ArgumentParser):
    """A subcommand parser whose arguments are added when that subcommand is parsed.

    A suite's own arguments live in its module, which imports numpy, numba or the HTTP stack:
    defining them lazily lets `posenc --help` and `posenc bench --help` list the suites from
    SUITES alone. argparse hands a chosen subcommand's arguments to its parser's
    `parse_known_args`, which runs `populate(parser)` first, once.
    """

    def __init__(self, *args, populate: Callable[[argparse.ArgumentParser], None], **kwargs):
        super().__init__(*args, **kwargs)
        self._populate: Callable[[argparse.ArgumentParser], None] | None = populate

    def parse_known_args(self, args=None, namespace=None):
        if self._populate is not None:
            populate, self._populate = self._populate, None
            populate(self)
        return super().parse_known_args(args, namespace)


def register(sub) -> None:
    p = sub.add_parser("bench", help="benchmarks with same-run baselines (markdown output)")
    suites = p.add_subparsers(dest="suite", required=True, metavar="SUITE", parser_class=LazyParser)
    for name, summary in SUITES.items():
        suites.add_parser(name, help=summary, populate=functools.partial(add_arguments, name))


def add_arguments(name: str, sp: argparse.ArgumentParser) -> None:
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
