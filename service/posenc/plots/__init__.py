"""Figures of positional encodings, the same for `posenc plot` (PNG/SVG files) and the explorer
page (SVG from the service): one module per figure, named as the figure, each
`build(encodings, params) -> (fig, summary)`.

matplotlib renders on the server; the page only shows the SVG, so it needs no plotting script,
style or font from anywhere. A figure's module (numpy, the kernels behind it) is imported when
that figure is first drawn, so `posenc plot --help` lists FIGURES without loading any of them.
"""

from __future__ import annotations

import importlib

from ..errors import PosencError
from .render import FORMATS, to_bytes

#: The figures; each is drawn by the `build` of this package's module of the same name.
FIGURES = ("heatmap", "spectrum", "decay", "alibi", "precision")


def render(kind: str, source: dict, params: dict | None = None, fmt: str = "svg") -> tuple[bytes, dict]:
    """(image bytes, summary) of figure `kind` for `source` ({"spec"} | {"specs"} | {"config"} | {})."""
    if kind not in FIGURES:
        raise PosencError("figure", f"unknown figure {kind!r}; choose one of {sorted(FIGURES)}")
    from .sources import encodings_of

    build = importlib.import_module(f"{__name__}.{kind}").build
    fig, summary = build(encodings_of(source), params or {})
    return to_bytes(fig, fmt), summary


def render_audit(report: dict, fmt: str = "svg") -> tuple[bytes, dict]:
    from .audit import build

    fig, summary = build(report)
    return to_bytes(fig, fmt), summary


__all__ = ["FIGURES", "FORMATS", "render", "render_audit"]
