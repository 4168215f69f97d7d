"""docs/lab.md reports the documented-size run shipped with posenc (posenc/lab/documented.json): each
table cell is that file's number as shown (perplexity to 2 decimals, accuracy to 3), every scheme and
length of the file is in the tables, and the run time and machine stated are the file's. A rerun that
replaces the file without the page (or the page without the file) fails here."""

from __future__ import annotations

from pathlib import Path

from posenc.lab import results

PAGE = Path(__file__).resolve().parents[1] / "docs" / "lab.md"
DOC = results.documented()


def table_after(heading: str) -> dict[str, dict[int, str]]:
    """{scheme: {length: cell}} of the first Markdown table after the line starting with `heading`."""
    lines = PAGE.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    rows = []
    for line in lines[start + 1:]:
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
        elif rows:
            break
    lengths = [int(cell) for cell in rows[0][1:]]
    return {row[0]: dict(zip(lengths, row[1:])) for row in rows[2:]}


def test_the_tables_are_the_shipped_files_numbers():
    for heading, task, metric, digits in (("**Language model: perplexity**", "lm", "perplexity", 2),
                                          ("**Copy: token accuracy**", "copy", "accuracy", 3)):
        table = table_after(heading)
        expected = {scheme: {p["length"]: f"{p[metric]:.{digits}f}" for p in points}
                    for name, scheme, points in results.rows(DOC) if name == task}
        if task == "lm":
            first = next(points for name, _, points in results.rows(DOC) if name == "lm")
            expected["(source floor)"] = {p["length"]: f"{p['source_perplexity']:.2f}" for p in first}
        assert table == expected, heading


def test_the_stated_run_time_and_machine_are_the_files():
    text = PAGE.read_text()
    total = DOC["timing_seconds"]["total"]
    assert f"**{int(total // 60)} min {round(total % 60)} s** ({round(total):,} s" in text
    assert f"torch {DOC['environment']['torch']}" in text
