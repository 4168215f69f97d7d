"""One word per meaning across the `posenc` command line (docs/cli.md, "One word per meaning").

The real parser (`posenc.cli.build_parser`) is walked through every subcommand, the bench suites'
lazily defined ones included, and every flag `--help` lists is collected with its dest and help.
A flag name used by more than one command must mean the same in each (MEANINGS: a pattern each
use's help matches); the retired spellings are never listed; every old spelling kept for scripts
parses to exactly what its new name does.
"""

from __future__ import annotations

import argparse
import re
from collections import defaultdict

import pytest

from posenc.cli import build_parser
from posenc.cli.bench import LazyParser
from posenc.cli.options import add_flag, is_hidden

#: What each flag means wherever it appears, as a pattern its help text matches in every command
#: that lists it. A flag shared by several commands must be here: a second meaning fails its pattern.
MEANINGS = {
    "--positions": r"\bpositions\b",
    "--rows": r"\brows\b|positions per table",
    "--config": r"^the service's TOML config",
    "--model-config": r"model's config\.json",
    "--port": r"^HTTP port",
    "--binary-port": r"binary-protocol TCP port",
    "--binary-socket": r"binary-protocol Unix socket",
    "--host": r"^listen address",
    "--shm-dir": r"^table store",
    "--seconds": r"^measured seconds per run",
    "--repeats": r"median",
    "--workers": r"worker processes",
    "--warmup": r"^seconds before measuring",
    "--connections": r"connections",
    "--pipeline": r"^requests in flight per connection",
    "--processes": r"posenc-load processes",
    "--quick": r"^a smoke run",
    "--layer-type": r"layer type",
    "--dtype": r"dtype",
    "--seq-len": r"sequence length",
    "--json": r"JSON",
    "--out": r"file",
    "--readme": r"into this file",
    "--isa": r"kernel paths",
    "--lock-timeout": r"registry lock",
    "--results": r"`posenc lab` results file",
}
#: Spellings replaced by the words above; each still parses (hidden), none is listed.
RETIRED = {"--duration", "--runs", "--root", "--unix"}


def walk(parser: argparse.ArgumentParser, command: tuple[str, ...] = ()):
    """(command, parser) for the parser and every subcommand's below it, a bench suite's arguments
    added first (they are defined when that suite is parsed)."""
    if isinstance(parser, LazyParser) and parser._populate is not None:
        populate, parser._populate = parser._populate, None
        populate(parser)
    yield command, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from walk(sub, (*command, name))


@pytest.fixture(scope="module")
def parser():
    return build_parser()


@pytest.fixture(scope="module")
def commands(parser):
    return dict(walk(parser))


def flags(commands, *, hidden: bool):
    """[(command, flag, action)] of the flags `--help` lists (hidden=False) or keeps unlisted (True)."""
    return [(command, flag, action) for command, sub in commands.items() for action in sub._actions
            for flag in action.option_strings
            if flag.startswith("--") and flag not in ("--help", "--version") and is_hidden(action) == hidden]


def test_the_walk_reaches_every_subcommand_and_suite(commands):
    assert {("serve",), ("binary-serve",), ("positions",), ("table", "build"), ("bench", "torch"),
            ("bench", "http"), ("bench", "startup"), ("plot",), ("audit",), ("demo",)} <= set(commands)


def test_a_flag_name_has_one_meaning(commands):
    uses = defaultdict(list)
    for command, flag, action in flags(commands, hidden=False):
        uses[flag].append((" ".join(command), action.help or ""))
    shared = {flag: where for flag, where in uses.items() if len(where) > 1}
    unlisted = sorted(set(shared) - set(MEANINGS))
    assert not unlisted, f"flags used by several commands without a meaning in MEANINGS: " \
                         f"{ {flag: [c for c, _ in shared[flag]] for flag in unlisted} }"
    wrong = [(flag, command, text) for flag, where in uses.items() if flag in MEANINGS
             for command, text in where if not re.search(MEANINGS[flag], text)]
    assert not wrong, "a flag used with another meaning:\n" + "\n".join(map(str, wrong))


def test_retired_spellings_are_not_listed(commands):
    listed = {(" ".join(command), flag) for command, flag, _ in flags(commands, hidden=False)}
    assert not [(command, flag) for command, flag in listed if flag in RETIRED]


def test_the_binary_listeners_and_config_files_are_named_alike(commands):
    """The four cases the issue found: binary listeners `--binary-port/--binary-socket` in `serve`
    and `binary-serve`; `--config` is the service's TOML only; run length `--seconds`; a cache
    length `--rows`."""
    def listed(command):
        return {flag for c, flag, _ in flags(commands, hidden=False) if c == command}

    for command in (("serve",), ("binary-serve",)):
        assert {"--binary-port", "--binary-socket", "--config", "--shm-dir"} <= listed(command)
    assert "--port" not in listed(("binary-serve",))
    for command in (("demo",), ("audit",), ("plot",), ("table", "build")):
        assert "--model-config" in listed(command) and "--config" not in listed(command)
    assert "--seconds" in listed(("bench", "http")) and "--rows" in listed(("bench", "torch"))
    assert "--positions" not in listed(("bench", "torch")) and "--repeats" in listed(("bench", "startup"))


def sample(action: argparse.Action) -> str:
    """A value the action's type accepts."""
    if action.choices:
        return str(list(action.choices)[0])
    return {int: "7", float: "2.5"}.get(action.type, "/tmp/posenc-vocabulary")


def required_argv(sub: argparse.ArgumentParser) -> list[str]:
    """The least a command needs to parse: its positionals and required options, each a sample value."""
    argv = []
    for action in sub._actions:
        if isinstance(action, argparse._SubParsersAction) or action.nargs == argparse.REMAINDER:
            continue
        if not action.option_strings:
            argv.append(sample(action))
        elif action.required:
            argv += [action.option_strings[0], sample(action)]
    return argv


def hidden_aliases(commands):
    """(command, old spelling, the listed action it stands for) of every kept old spelling."""
    out = []
    for command, flag, action in flags(commands, hidden=True):
        (new,) = [a for a in commands[command]._actions if a.dest == action.dest and not is_hidden(a)]
        out.append((command, flag, new))
    return out


def test_the_old_spellings_kept(commands):
    kept = {(" ".join(command), flag, new.option_strings[0]) for command, flag, new in hidden_aliases(commands)}
    assert kept == {
        ("demo", "--config", "--model-config"), ("audit", "--config", "--model-config"),
        ("plot", "--config", "--model-config"), ("table build", "--config", "--model-config"),
        ("binary-serve", "--port", "--binary-port"), ("binary-serve", "--unix", "--binary-socket"),
        ("bench torch", "--positions", "--rows"), ("bench http", "--duration", "--seconds"),
        ("bench startup", "--runs", "--repeats"), ("bench clients", "--workers", "--client-threads"),
        *((f"table {action}", "--root", "--shm-dir") for action in ("build", "ls", "rm", "verify")),
    }


def test_every_old_spelling_parses_to_what_its_new_name_does(parser, commands):
    for command, old, new in hidden_aliases(commands):
        base = [*command, *required_argv(commands[command])]
        value = sample(new)
        by_old = parser.parse_args([*base, old, value])
        by_new = parser.parse_args([*base, new.option_strings[0], value])
        expected = new.type(value) if new.type else value
        assert getattr(by_old, new.dest) == getattr(by_new, new.dest) == expected, (command, old)
        assert vars(by_old) == vars(by_new), (command, old)
        unset = parser.parse_args(base)  # neither given: the new name's default, the old one adds nothing
        assert getattr(unset, new.dest) == new.default, (command, old)
        assert old not in commands[command].format_help(), (command, old)


def test_add_flag_keeps_old_spellings_of_value_flags_only():
    p = argparse.ArgumentParser()
    with pytest.raises(TypeError):
        add_flag(p, "--quiet", old=("--silent",), action="store_true")
    with pytest.raises(TypeError):
        add_flag(p, "--name", old=("--title",), required=True)
