"""`posenc bench SUITE --readme docs/benchmarks.md` rewrites only the suite's marked block."""

import pytest

from posenc.bench.readme import replace_block
from posenc.errors import PosencError

README = "# x\n<!-- bench: qps -->\nold table\n<!-- /bench: qps -->\nafter\n<!-- bench: http -->\nkeep\n<!-- /bench: http -->\n"


def test_only_the_suites_block_is_replaced():
    out = replace_block(README, "qps", "| new | table |\n")
    assert out == README.replace("old table", "| new | table |")
    assert replace_block(out, "qps", "| new | table |") == out  # idempotent


@pytest.mark.parametrize("text", ["no markers", README + "<!-- bench: qps -->\n", README.replace("<!-- /bench: qps -->", "")])
def test_missing_or_repeated_markers_are_refused(text):
    with pytest.raises(PosencError) as err:
        replace_block(text, "qps", "t")
    assert err.value.field == "readme"


def test_the_benchmarks_page_has_a_block_for_each_regenerated_suite():
    from pathlib import Path
    text = (Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md").read_text()
    for suite in ("http", "qps", "json"):
        assert text.count(f"<!-- bench: {suite} -->") == 1 and text.count(f"<!-- /bench: {suite} -->") == 1
