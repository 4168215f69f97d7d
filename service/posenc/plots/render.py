"""matplotlib figures to SVG or PNG bytes, without pyplot: a `matplotlib.figure.Figure` per call
(no global figure registry, so nothing leaks when a figure's build fails, and threads of the
service never share one), Agg rendering, no display. The viewer needs no font: SVG text is drawn
as paths with the DejaVu fonts matplotlib ships.

matplotlib is imported on the first figure, not with the package, so the service's workers start
as fast as without it."""

from __future__ import annotations

import functools
import io

from ..errors import PosencError

FORMATS = ("svg", "png")
STYLE = {"svg.fonttype": "path", "font.size": 9, "axes.grid": True, "grid.alpha": 0.3,
         "svg.hashsalt": "posenc", "figure.dpi": 100}


@functools.cache
def _matplotlib():
    import matplotlib
    from matplotlib.figure import Figure

    return matplotlib, Figure


def figure(ncols: int = 1, nrows: int = 1, width: float = 4.6, height: float = 3.4):
    matplotlib, Figure = _matplotlib()
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(width * ncols, height * nrows), layout="constrained")
        axes = fig.subplots(nrows, ncols, squeeze=False)
    return fig, axes


def to_bytes(fig, fmt: str) -> bytes:
    if fmt not in FORMATS:
        raise PosencError("format", f"must be one of {list(FORMATS)}, got {fmt!r}")
    matplotlib, _ = _matplotlib()
    out = io.BytesIO()
    with matplotlib.rc_context(STYLE):
        fig.savefig(out, format=fmt, metadata={"Date": None} if fmt == "svg" else None)
    return out.getvalue()
