"""The audit's error against position: the user's cache next to what each known way of
computing it gets, so the matching curve is visible (see posenc.audit)."""

from __future__ import annotations

import textwrap

import numpy as np

from ..errors import PosencError
from .precision import FLOOR
from .render import figure


def build(report: dict):
    try:
        profile = report["profile"]
        positions = np.asarray(profile["positions"], dtype=float)
        series = profile["series"]
        diagnosis = report["diagnosis"]
    except (KeyError, TypeError, ValueError):
        raise PosencError("report", "must be a report from POST /v1/audit (with its profile)") from None
    fig, axes = figure(1, width=6.4, height=3.8)
    ax = axes[0][0]
    x = np.maximum(positions, 1)
    for name, values in series.items():
        y = np.maximum(np.asarray([np.nan if v is None else v for v in values], dtype=float), FLOOR)
        style = dict(lw=2.2, color="black") if name == "your cache" else dict(lw=0.9, ls="--")
        ax.loglog(x, y, label=name, **style)
    ax.axhline(max(float(profile.get("floor", FLOOR)), FLOOR), color="tab:gray", lw=0.8, label="storage rounding")
    ax.set_title("\n".join(textwrap.wrap(f"audit: {diagnosis['title']} ({diagnosis['confidence']} confidence)", 70)))
    ax.set_xlabel("position")
    ax.set_ylabel("max |error| vs exact")
    ax.legend(fontsize=7)
    return fig, {"diagnosis": diagnosis["cause"]}
