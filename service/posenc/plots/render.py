"""matplotlib figures to SVG or PNG bytes: the Agg backend, no display, no font files needed by
the viewer (SVG text is drawn as paths with the DejaVu fonts matplotlib ships)."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ..errors import PosencError  # noqa: E402

FORMATS = ("svg", "png")
STYLE = {"svg.fonttype": "path", "font.size": 9, "axes.grid": True, "grid.alpha": 0.3,
         "svg.hashsalt": "posenc", "figure.dpi": 100}


def figure(ncols: int = 1, nrows: int = 1, width: float = 4.6, height: float = 3.4):
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False,
                                 layout="constrained")
    return fig, axes


def to_bytes(fig, fmt: str) -> bytes:
    if fmt not in FORMATS:
        raise PosencError("format", f"must be one of {list(FORMATS)}, got {fmt!r}")
    out = io.BytesIO()
    with plt.rc_context(STYLE):
        fig.savefig(out, format=fmt, metadata={"Date": None} if fmt == "svg" else None)
    plt.close(fig)
    return out.getvalue()
