"""Figures of positional encodings, the same for `posenc plot` (PNG/SVG files) and the explorer
page (SVG from the service): one module per figure, each `build(encodings, params) -> (fig, summary)`.

matplotlib renders on the server; the page only shows the SVG, so it needs no plotting script,
style or font from anywhere.
"""

from __future__ import annotations

from ..errors import PosencError
from . import alibi, audit, decay, heatmap, precision, spectrum
from .render import FORMATS, to_bytes
from .sources import encodings_of

FIGURES = {"heatmap": heatmap.build, "spectrum": spectrum.build, "decay": decay.build, "alibi": alibi.build,
           "precision": precision.build}


def render(kind: str, source: dict, params: dict | None = None, fmt: str = "svg") -> tuple[bytes, dict]:
    """(image bytes, summary) of figure `kind` for `source` ({"spec"} | {"specs"} | {"config"} | {})."""
    if kind not in FIGURES:
        raise PosencError("figure", f"unknown figure {kind!r}; choose one of {sorted(FIGURES)}")
    fig, summary = FIGURES[kind](encodings_of(source), params or {})
    return to_bytes(fig, fmt), summary


def render_audit(report: dict, fmt: str = "svg") -> tuple[bytes, dict]:
    fig, summary = audit.build(report)
    return to_bytes(fig, fmt), summary


__all__ = ["FIGURES", "FORMATS", "render", "render_audit"]
