"""A `model.Figure` drawn by matplotlib to SVG or PNG bytes (`posenc plot`), without pyplot: a
`matplotlib.figure.Figure` per call (no global figure registry, so nothing leaks when a figure's
build fails, and threads of the service never share one), Agg rendering, no display. SVG text is
drawn as paths with the DejaVu fonts matplotlib ships, so the file needs no font.

matplotlib is imported on the first figure, not with the package, so the service's workers start
as fast as without it."""

from __future__ import annotations

import functools
import io
import textwrap

import numpy as np

from .model import Figure, Panel

STYLE = {"svg.fonttype": "path", "font.size": 10, "axes.grid": True, "grid.alpha": 0.3,
         "svg.hashsalt": "posenc", "figure.dpi": 100, "legend.fontsize": 8}
PANEL_WIDTH, PANEL_HEIGHT = 5.2, 3.8
#: Characters of a title line that fit a panel's width (10 pt DejaVu Sans); longer titles wrap.
TITLE_CHARS = 60


@functools.cache
def _matplotlib():
    import matplotlib
    from matplotlib.figure import Figure as MplFigure

    return matplotlib, MplFigure


def _values(values, floor):
    y = np.asarray([np.nan if v is None else v for v in values], dtype=float)
    return np.maximum(y, floor) if floor is not None else y


def _panel(fig, ax, panel: Panel) -> None:
    if panel.heat is not None:
        image = ax.imshow(np.asarray(panel.heat.z, dtype=float), aspect="auto", cmap="RdBu_r", vmin=panel.heat.low,
                          vmax=panel.heat.high, interpolation="nearest", origin="upper")
        ax.grid(False)
        fig.colorbar(image, ax=ax, shrink=0.8)
    for band in panel.bands:
        span = ax.axvspan if band.axis == "x" else ax.axhspan
        span(band.low, band.high, color="tab:green", alpha=0.15, label=band.label)
    for s in panel.series:
        style = {"lw": 2.2, "color": "black"} if s.emphasis else {"lw": 1}
        if s.mark == "point":
            ax.plot(s.x, _values(s.y, panel.y_floor), "o", ms=2.5, label=s.name)
        else:
            ax.plot(s.x, _values(s.y, panel.y_floor), label=s.name, **style)
    colors = ("tab:red", "tab:orange", "tab:gray", "tab:purple")
    for i, rule in enumerate(panel.rules):
        line = ax.axvline if rule.axis == "x" else ax.axhline
        line(rule.value, color=colors[i % len(colors)], lw=1, ls="--" if rule.dashed else "-", label=rule.label)
    if panel.x_log:
        ax.set_xscale("log")
    if panel.y_log:
        ax.set_yscale("log")
    title = "\n".join(part for line in panel.title.split("\n") for part in textwrap.wrap(line, TITLE_CHARS) or [""])
    ax.set(title=title, xlabel=panel.x_label, ylabel=panel.y_label)
    if panel.series or panel.rules or panel.bands:
        ax.legend(loc="best")


def draw(figure: Figure):
    """The matplotlib figure of `figure`, one panel per column."""
    matplotlib, MplFigure = _matplotlib()
    n = max(1, len(figure.panels))
    with matplotlib.rc_context(STYLE):
        fig = MplFigure(figsize=(PANEL_WIDTH * n, PANEL_HEIGHT), layout="constrained")
        axes = fig.subplots(1, n, squeeze=False)[0]
        for ax, panel in zip(axes, figure.panels):
            _panel(fig, ax, panel)
    return fig


def to_bytes(figure: Figure, fmt: str) -> bytes:
    """`fmt` "svg" or "png" (posenc.plots.FORMATS, checked there)."""
    matplotlib, _ = _matplotlib()
    fig = draw(figure)
    out = io.BytesIO()
    with matplotlib.rc_context(STYLE):
        fig.savefig(out, format=fmt, metadata={"Date": None} if fmt == "svg" else None)
    return out.getvalue()
