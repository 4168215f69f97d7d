"""The explorer's share link as docs/explorer.md documents it ("Share links"): the example link is what the
page's recipe there builds. tests/test_explore_browser.py opens it and checks the page writes it back."""

from __future__ import annotations

from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs" / "explorer.md"
DOC_ORIGIN = "http://127.0.0.1:8000"


def documented_link() -> str:
    """The example link of docs/explorer.md's "Share links" (the one line of its text block)."""
    (link,) = [line for line in DOCS.read_text().splitlines() if line.startswith(f"{DOC_ORIGIN}/explore#")]
    return link


def test_the_documented_link_is_what_its_recipe_builds(capsys):
    text = DOCS.read_text()
    recipe = text[text.index("```python\n", text.index("## Share links")) + len("```python\n"):]
    exec(recipe[:recipe.index("```")], {})
    assert capsys.readouterr().out.strip() == documented_link()
