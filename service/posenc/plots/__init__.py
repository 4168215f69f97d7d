"""Figures of positional encodings, the same numbers for `posenc plot` (PNG/SVG files drawn by
matplotlib) and the explorer page (a Vega-Lite spec, interactive): one module per figure, named as
the figure, each `build(encodings, params) -> model.Figure` and declaring the PARAMS it takes (any
other is an error naming it, never ignored).

A figure's module (numpy, the kernels behind it) and its renderer are imported when that figure is
first drawn, so `posenc plot --help` lists FIGURES without loading any of them.
"""

from __future__ import annotations

import importlib

from ..errors import PosencError

#: The figures; each is drawn by the `build` of this package's module of the same name.
FIGURES = ("heatmap", "spectrum", "decay", "alibi", "precision")
#: Image files (matplotlib); the page's interactive spec (Vega-Lite with the numbers behind the figure); the
#: figure's points as CSV (the page's CSV export).
FORMATS = ("svg", "png")
ALL_FORMATS = (*FORMATS, "vega", "csv")


def figure(kind: str, source: dict, params: dict | None = None):
    """The `model.Figure` `kind` for `source` ({"spec"} | {"specs"} | {"config"} | {}), its parameters checked."""
    if kind not in FIGURES:
        raise PosencError("figure", f"unknown figure {kind!r}; choose one of {sorted(FIGURES)}")
    params = params or {}
    if not isinstance(params, dict):
        raise PosencError("params", "must be an object of figure parameters")
    module = importlib.import_module(f"{__name__}.{kind}")
    for name in params:
        if name not in module.PARAMS:
            raise PosencError(f"params.{name}", f"is not a parameter of the {kind} figure; it takes "
                              f"{', '.join(module.PARAMS) if module.PARAMS else 'none'}")
    from .sources import encodings_of

    return module.build(encodings_of(source), params)


def _check_format(fmt: str) -> None:
    if fmt not in ALL_FORMATS:
        raise PosencError("format", f"must be one of {list(ALL_FORMATS)}, got {fmt!r}")


def _output(fig, fmt: str) -> tuple[bytes | dict, dict]:
    _check_format(fmt)
    if fmt == "vega":
        from .vega import to_spec

        return {"vega": to_spec(fig), "data": fig.to_dict()}, fig.summary
    if fmt == "csv":
        return fig.to_csv().encode("utf-8"), fig.summary
    from .mpl import to_bytes

    return to_bytes(fig, fmt), fig.summary


def render(kind: str, source: dict, params: dict | None = None, fmt: str = "svg") -> tuple[bytes | dict, dict]:
    """(image or CSV bytes, summary), or for fmt "vega" ({"vega": spec, "data": numbers}, summary)."""
    _check_format(fmt)  # before any figure is computed
    return _output(figure(kind, source, params), fmt)


def render_audit(report: dict, fmt: str = "svg") -> tuple[bytes | dict, dict]:
    from .audit import build

    return _output(build(report), fmt)


def render_lab(results: dict, fmt: str = "svg") -> tuple[bytes | dict, dict]:
    """A `posenc lab` results document drawn (metrics and attention entropy against length)."""
    from .lab import build

    return _output(build(results), fmt)


__all__ = ["ALL_FORMATS", "FIGURES", "FORMATS", "figure", "render", "render_audit", "render_lab"]
