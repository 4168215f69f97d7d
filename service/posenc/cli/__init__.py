"""`posenc` command line. Each subcommand lives in its own module with a `register(subparsers)`.

The parser is built on every run, `--help` included, so a subcommand module imports at its top
only what its parser needs (argparse, the standard library, `posenc.errors`); its handler imports
the implementation (numpy, numba, the HTTP stack, matplotlib) when that subcommand runs.
`tests/test_startup.py` keeps it so.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from .. import __version__
from ..errors import PosencError

#: Subcommand modules, in the order `posenc --help` lists them.
COMMANDS = ["demo", "positions", "info", "bench", "table", "serve", "binary", "audit", "plot", "explore", "lab",
            "pick"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="posenc", description="Exact, fast positional encodings.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"{__name__}.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command. Parsing is inside the `try` too: a parser that loads its arguments on
    demand (`posenc bench SUITE`) imports posenc's kernels, which can refuse POSENC_ISA."""
    try:
        args = build_parser().parse_args(argv)
        return int(args.handler(args) or 0)
    except PosencError as exc:
        print(f"posenc: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
