"""The audit's error against position: the user's cache next to what each known way of
computing it gets, so the matching curve is visible (see posenc.audit)."""

from __future__ import annotations

import textwrap

from ..errors import PosencError
from .model import Figure, Panel, Rule, Series
from .precision import FLOOR


def build(report: dict) -> Figure:
    try:
        profile = report["profile"]
        positions = [max(float(p), 1.0) for p in profile["positions"]]
        series = profile["series"]
        diagnosis = report["diagnosis"]
        title, cause, confidence = diagnosis["title"], diagnosis["cause"], diagnosis["confidence"]
        drawn = [Series(name, positions, [float("nan") if v is None else v for v in values],
                        emphasis=name == "your cache") for name, values in series.items()]
        floor = max(float(profile.get("floor", FLOOR)), FLOOR)
    except (KeyError, TypeError, ValueError, AttributeError):
        raise PosencError("report", "must be a report from POST /v1/audit (with its profile)") from None
    panel = Panel("\n".join(textwrap.wrap(f"audit: {title} ({confidence} confidence)", 70)), "position",
                  "max |error| vs exact", x_log=True, y_log=True, series=drawn,
                  rules=[Rule("y", floor, "storage rounding")], y_floor=FLOOR)
    return Figure([panel], {"diagnosis": cause, "text": f"{cause}: {title} ({confidence} confidence)"})
