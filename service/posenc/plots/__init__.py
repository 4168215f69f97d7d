"""Figures of positional encodings, the same numbers for `posenc plot` (PNG/SVG files drawn by
matplotlib) and the explorer page (a Vega-Lite spec, interactive): one module per figure, each
`build(encodings, params) -> model.Figure`, and each declaring the PARAMS it takes (any other is an
error naming it, never ignored)."""

from __future__ import annotations

from ..errors import PosencError
from . import alibi, audit, decay, heatmap, precision, spectrum
from .model import Figure
from .render import FORMATS, to_bytes
from .sources import encodings_of
from .vega import to_spec

MODULES = {"heatmap": heatmap, "spectrum": spectrum, "decay": decay, "alibi": alibi, "precision": precision}
FIGURES = {name: module.build for name, module in MODULES.items()}
#: What `render` makes: image files (matplotlib) or the page's interactive spec (Vega-Lite + the data).
ALL_FORMATS = FORMATS + ("vega",)


def figure(kind: str, source: dict, params: dict | None = None) -> Figure:
    """The figure `kind` for `source` ({"spec"} | {"specs"} | {"config"} | {}), its parameters checked."""
    if kind not in MODULES:
        raise PosencError("figure", f"unknown figure {kind!r}; choose one of {sorted(MODULES)}")
    params = params or {}
    if not isinstance(params, dict):
        raise PosencError("params", "must be an object of figure parameters")
    known = MODULES[kind].PARAMS
    for name in params:
        if name not in known:
            raise PosencError(f"params.{name}", f"is not a parameter of the {kind} figure; it takes "
                              f"{', '.join(known) if known else 'none'}")
    return MODULES[kind].build(encodings_of(source), params)


def _output(fig: Figure, fmt: str) -> tuple[bytes | dict, dict]:
    if fmt == "vega":
        return {"vega": to_spec(fig), "data": fig.to_dict()}, fig.summary
    return to_bytes(fig, fmt), fig.summary


def render(kind: str, source: dict, params: dict | None = None, fmt: str = "svg") -> tuple[bytes | dict, dict]:
    """(image bytes, summary), or for fmt "vega" ({"vega": spec, "data": numbers}, summary)."""
    if fmt not in ALL_FORMATS:
        raise PosencError("format", f"must be one of {list(ALL_FORMATS)}, got {fmt!r}")
    return _output(figure(kind, source, params), fmt)


def render_audit(report: dict, fmt: str = "svg") -> tuple[bytes | dict, dict]:
    if fmt not in ALL_FORMATS:
        raise PosencError("format", f"must be one of {list(ALL_FORMATS)}, got {fmt!r}")
    return _output(audit.build(report), fmt)


__all__ = ["ALL_FORMATS", "FIGURES", "FORMATS", "figure", "render", "render_audit"]
