"""MkDocs hook: the site's nav from the pages that exist, so a page added later appears without
editing mkdocs.yml and a page listed here but absent is simply left out (no broken nav entry).

ORDER names the pages in reading order by section; any other page under docs/ goes to "More"."""

from __future__ import annotations

from pathlib import Path

ORDER = {
    "Start": ["index.md"],
    "Guides": ["library.md", "model-families.md", "models.md", "torch.md", "shm.md", "http.md",
               "http-pipeline.md", "binary-protocol.md", "server-io.md", "explore-and-audit.md",
               "explorer.md", "deploy.md", "startup.md", "platforms.md"],
    "Contracts": ["protocol.md", "shm-format.md", "audit.md"],
    "Reference": ["api.md", "benchmarks.md", "layout.md"],
}


def nav_for(pages: list[str]) -> list:
    """The nav for these page paths (relative to docs/): ORDER's sections, then "More"."""
    present = set(pages)
    nav: list = []
    for section, names in ORDER.items():
        entries = [name for name in names if name in present]
        if entries:
            nav.append({section: entries})
    listed = {name for names in ORDER.values() for name in names}
    extra = sorted(p for p in pages if p not in listed)
    if extra:
        nav.append({"More": extra})
    return nav


def on_config(config, **kwargs):
    docs = Path(config["docs_dir"])
    config["nav"] = nav_for([p.relative_to(docs).as_posix() for p in docs.rglob("*.md")])
    return config
