"""The command line's one vocabulary: a flag name means one thing in every subcommand.

The words (docs/cli.md, "One word per meaning"): `--positions` the positions to compute, `--rows` a
benchmarked table's or cache's length, `--config` the service's TOML config, `--model-config` a
model's config.json, `--binary-port` / `--binary-socket` the binary protocol's listeners, `--shm-dir`
the table store, `--seconds` a measured run's length, `--repeats` the runs a median is taken over.
A renamed flag keeps its old spelling through `add_flag(..., old=...)`: parsed, not listed.
tests/test_cli_vocabulary.py walks every subcommand's parser and holds each flag to its meaning.

Imports argparse only: every `posenc --help` builds the parsers (tests/test_startup.py).
"""

from __future__ import annotations

import argparse


def add_flag(parser: argparse.ArgumentParser, name: str, *, old: tuple[str, ...] = (), **kwargs) -> argparse.Action:
    """`parser.add_argument(name, **kwargs)`, and each `old` spelling as a hidden argument storing to
    the same dest with the same type: scripts written before the rename keep working, while
    `--help` lists one word per meaning. (argparse cannot hide one option string of an argument,
    hence an argument per old spelling; its default is SUPPRESS so it never overwrites the new
    name's.)"""
    action = parser.add_argument(name, **kwargs)
    if old and (type(action) is not argparse._StoreAction or action.required):
        raise TypeError(f"{name}: only an optional flag that stores a value can keep old spellings")
    for spelling in old:
        parser.add_argument(spelling, dest=action.dest, type=action.type, choices=action.choices,
                            metavar=action.metavar, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return action


def is_hidden(action: argparse.Action) -> bool:
    """An old spelling `add_flag` kept (or any argument `--help` does not list)."""
    return action.help == argparse.SUPPRESS
