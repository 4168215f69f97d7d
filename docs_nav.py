"""MkDocs hook: the site's nav from the pages that exist, so a page added later appears without
editing mkdocs.yml and a page listed here but absent is simply left out (no broken nav entry).

ORDER names the pages in reading order by section; any other page under docs/ goes to "More".
TITLES gives a short nav label where a page's own H1 is long; other pages are labelled by their H1."""

from __future__ import annotations

from pathlib import Path

ORDER = {
    "Start": ["index.md"],
    "Guides": ["library.md", "cli.md", "model-families.md", "models.md", "torch.md", "shm.md", "http.md",
               "http-pipeline.md", "binary-protocol.md", "go.md", "java.md", "server-io.md",
               "explore-and-audit.md", "explorer.md", "lab.md", "pick.md", "deploy.md", "startup.md", "platforms.md"],
    "Contracts": ["protocol.md", "shm-format.md", "audit.md"],
    "Reference": ["api.md", "formulas.md", "benchmarks.md", "layout.md"],
}

TITLES = {
    "index.md": "Overview", "cli.md": "Command line", "model-families.md": "Model families", "torch.md": "Inside transformers",
    "explore-and-audit.md": "Explorer and audit", "go.md": "Go client", "deploy.md": "Deploy", "protocol.md": "Binary protocol v1",
    "shm-format.md": "Shared-memory format v1", "audit.md": "Audit report", "java.md": "Java client", "lab.md": "Lab: train short, test long", "pick.md": "Pick an encoding",
}


def entry(name: str):
    return {TITLES[name]: name} if name in TITLES else name


def nav_for(pages: list[str]) -> list:
    """The nav for these page paths (relative to docs/): ORDER's sections, then "More"."""
    present = set(pages)
    nav: list = []
    for section, names in ORDER.items():
        entries = [entry(name) for name in names if name in present]
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
