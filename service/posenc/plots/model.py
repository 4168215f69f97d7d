"""A figure as data: panels of series, reference lines, shaded bands or a heatmap, each number the
library computed. Two renderers draw the same `Figure`: matplotlib for `posenc plot` (PNG/SVG
files, `mpl.py`) and Vega-Lite for the explorer page (interactive: zoom, hover, export,
`vega.py`); `Figure.to_dict()` is the data behind it (the page's CSV/JSON export, the tests)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field


def _clean(values) -> list:
    """Floats for JSON: NaN and infinities become None (a gap in the line)."""
    out = []
    for v in values:
        v = float(v)
        out.append(v if math.isfinite(v) else None)
    return out


@dataclass
class Series:
    name: str
    x: list
    y: list
    mark: str = "line"  # line | point
    emphasis: bool = False  # drawn thicker (the user's own data among references)

    def __post_init__(self):
        self.x, self.y = _clean(self.x), _clean(self.y)


@dataclass
class Rule:
    axis: str  # "x": a vertical line at value; "y": a horizontal one
    value: float
    label: str
    dashed: bool = False


@dataclass
class Band:
    axis: str  # "x" | "y": the span shaded
    low: float
    high: float
    label: str


@dataclass
class Heat:
    """z[row][col] over rows (y) and cols (x), drawn on a diverging scale from low to high."""

    z: list
    low: float = -1.0
    high: float = 1.0


@dataclass
class Panel:
    title: str
    x_label: str
    y_label: str
    x_log: bool = False
    y_log: bool = False
    series: list = field(default_factory=list)
    rules: list = field(default_factory=list)
    bands: list = field(default_factory=list)
    heat: Heat | None = None
    y_floor: float | None = None  # log axes: values below are drawn at this floor (an exact 0 has no log)


@dataclass
class Figure:
    panels: list
    summary: dict

    def to_dict(self) -> dict:
        return {"panels": [asdict(p) for p in self.panels], "summary": self.summary}
