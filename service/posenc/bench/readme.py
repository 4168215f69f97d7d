"""Write a bench's markdown into a page between its markers (docs/benchmarks.md holds them), so the tables
there are the bench commands' own output, never retyped: `<!-- bench: SUITE -->` ... `<!-- /bench: SUITE -->`."""

from __future__ import annotations

from pathlib import Path

from ..errors import PosencError


def markers(suite: str) -> tuple[str, str]:
    return f"<!-- bench: {suite} -->", f"<!-- /bench: {suite} -->"


def replace_block(text: str, suite: str, markdown: str) -> str:
    """`text` with the block between `suite`'s markers replaced by `markdown` (markers kept)."""
    begin, end = markers(suite)
    if text.count(begin) != 1 or text.count(end) != 1:
        raise PosencError("readme", f"needs exactly one {begin!r} and one {end!r} line")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{markdown.strip()}\n{end}{tail}"


def write_into(path: Path, suite: str, markdown: str) -> None:
    path.write_text(replace_block(path.read_text(), suite, markdown))
