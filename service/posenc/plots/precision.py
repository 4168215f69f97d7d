"""Precision: error against position (log-log) of a RoPE cache as common frameworks compute it
(float32 angles, bfloat16 positions, a float16 cache) next to posenc's float32 output, all
against the float64 exact values. The frameworks' recipes are the audit's simulations."""

from __future__ import annotations

import numpy as np

from ..api import rope_cos_sin
from ..args import as_int
from ..audit.precision import exact_cos_sin, float32_inv_freq, simulate
from .render import figure
from .sources import rope_specs

POINTS = 240
FLOOR = 1e-9  # plotted in place of an exact 0 on the log axis


def precision_data(spec, max_position: int) -> dict:
    positions = np.unique(np.geomspace(1, max_position, POINTS).astype(np.int64))
    # Length-dependent variants (dynamic, LongRoPE) at the plotted length, the same for every series.
    seq_len = float(max_position) if spec.length_dependent else None
    inv, attention = spec.inv_freq(seq_len)
    inv32 = float32_inv_freq(inv, spec.rotary_dim, spec.rope_type)
    exact_c, exact_s = exact_cos_sin(positions, inv, attention)

    def err(c, s):
        return np.maximum(np.abs(c - exact_c).max(axis=1), np.abs(s - exact_s).max(axis=1))

    mine_c, mine_s = rope_cos_sin(positions, spec, seq_len=seq_len, dtype="float32")
    series = {"posenc (float32 out)": err(mine_c.astype(np.float64), mine_s.astype(np.float64)),
              "float32 angles (HF)": err(*simulate("float32_angles", positions, inv, inv32, attention)),
              "bfloat16 positions": err(*simulate("bf16_positions", positions, inv, inv32, attention)),
              "float16 cache": err(exact_c.astype(np.float16).astype(np.float64),
                                   exact_s.astype(np.float16).astype(np.float64))}
    return {"positions": positions.tolist(),
            "series": {k: np.where(np.isfinite(v), v, np.nan).tolist() for k, v in series.items()},
            "at_max": {k: float(v[-1]) for k, v in series.items()}}


def build(encodings, params: dict):
    specs = rope_specs(encodings)
    max_position = as_int(params.get("max_position", 1 << 20), "max_position", minimum=16, maximum=1 << 26)
    fig, axes = figure(len(specs))
    summary = []
    for ax, (name, spec) in zip(axes[0], specs):
        data = precision_data(spec, max_position)
        for label, values in data["series"].items():
            ax.loglog(data["positions"], np.maximum(np.asarray(values, dtype=float), FLOOR), lw=1, label=label)
        ax.set_title(f"{name}: max |error| vs position")
        ax.set_xlabel("position")
        ax.set_ylabel("max |cos, sin - exact|")
        ax.legend(fontsize=7)
        summary.append({"label": name, "max_position": max_position, "error_at_max_position": data["at_max"]})
    return fig, {"panels": summary}
