"""A figure as data: panels of series, reference lines, shaded bands or a heatmap, each number the
library computed. Two renderers draw the same `Figure`: matplotlib for `posenc plot` (PNG/SVG
files, `mpl.py`) and Vega-Lite for the explorer page (interactive: zoom, hover, export,
`vega.py`); `Figure.to_dict()` is the data behind it (the page's JSON export, the tests) and
`Figure.to_csv()` its points as a table (the page's CSV export and `posenc plot --out x.csv`: one
implementation, so the two files are the same bytes)."""

from __future__ import annotations

import csv
import io
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

    def to_csv(self) -> str:
        """One row per drawn point: a series' (x, y); a reference line's value in x (vertical) or y
        (horizontal); a heatmap cell's column in x, position in y and number in value. Bands and the
        summary are in the JSON export only. Numbers are written as Python's shortest round-trip form."""
        out = io.StringIO()
        rows = csv.writer(out, lineterminator="\n")
        rows.writerow(CSV_COLUMNS)
        for panel in self.panels:
            for s in panel.series:
                rows.writerows((panel.title, s.name, _number(x), _number(y), "") for x, y in zip(s.x, s.y))
            for rule in panel.rules:
                value = _number(rule.value)
                rows.writerow((panel.title, rule.label, value if rule.axis == "x" else "",
                               value if rule.axis == "y" else "", ""))
            if panel.heat is not None:
                rows.writerows((panel.title, "heat", col, row, _number(v))
                               for row, values in enumerate(panel.heat.z) for col, v in enumerate(values))
        return out.getvalue()


#: The CSV export's header.
CSV_COLUMNS = ("panel", "series", "x", "y", "value")


def _number(value) -> str:
    """A CSV cell: empty for a gap (None), an integer without ".0", else the shortest round-trip float."""
    if value is None:
        return ""
    value = float(value)
    return str(int(value)) if value.is_integer() and abs(value) < 2 ** 53 else repr(value)
