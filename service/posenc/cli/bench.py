"""`posenc bench SUITE`: run a benchmark suite and print its markdown table (optionally into a file or\nbetween its markers in a page: docs/benchmarks.md)."""

from __future__ import annotations

import argparse
import functools
import importlib
from collections.abc import Callable
from pathlib import Path

from ..bench import SUITES
from ..bench.paths import PER_PATH_SUITES, on_this_path, requested_paths, run_per_path, suite_argv
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
    before = {action.dest for action in sp._actions}
    importlib.import_module(f"posenc.bench.{name}").add_arguments(sp)
    own = {action.dest for action in sp._actions} - before
    if name in PER_PATH_SUITES:
        sp.add_argument("--isa", default="all", help="native kernel paths to measure, each in its own process "
                        "with POSENC_ISA set: all (default: every path this CPU runs) or a comma-separated list "
                        "of avx512, avx2, scalar")
    sp.add_argument("--out", type=Path, help="also write the markdown table to this file")
    sp.add_argument("--readme", type=Path, help=f"also put it into this file between "
                    f"'<!-- bench: {name} -->' and '<!-- /bench: {name} -->'")
    sp.set_defaults(handler=run, suite_argv=functools.partial(suite_argv, sp, own=own))


def run(args) -> int:
    paths = requested_paths(args.isa) if getattr(args, "isa", None) else []
    if on_this_path(paths):
        markdown = importlib.import_module(f"posenc.bench.{args.suite}").run(args)
    else:
        markdown = run_per_path(args.suite, args.suite_argv(args), paths)
    print(markdown)
    if args.out:
        args.out.write_text(markdown)
    if args.readme:
        write_into(args.readme, args.suite, markdown)
        print(f"updated the {args.suite} table in {args.readme}")
    return 0
