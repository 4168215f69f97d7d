"""Precision: error against position (log-log) of a RoPE cache as common frameworks compute it
(float32 angles, bfloat16 positions, a float16 cache) next to posenc's float32 output, all
against the float64 exact values. The frameworks' recipes are the audit's simulations. The
summary gives each series' worst error over the plotted positions and where (the value at the
last position alone misleads: 2^20 is exact in bfloat16, the positions before it are not)."""

from __future__ import annotations

import numpy as np

from ..api import rope_cos_sin
from ..args import as_int
from ..audit.precision import exact_cos_sin, float32_inv_freq, simulate
from .model import Figure, Panel, Series
from .sources import rope_specs

POINTS = 240
FLOOR = 1e-9  # plotted in place of an exact 0 on the log axis
PARAMS = ("max_position",)


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
    worst = {k: int(np.argmax(v)) for k, v in series.items()}
    return {"positions": positions.tolist(),
            "series": {k: np.where(np.isfinite(v), v, np.nan).tolist() for k, v in series.items()},
            "worst": {k: {"error": float(series[k][i]), "position": int(positions[i])} for k, i in worst.items()},
            "at_max": {k: float(v[-1]) for k, v in series.items()}}


def build(encodings, params: dict) -> Figure:
    max_position = as_int(params.get("max_position", 1 << 20), "max_position", minimum=16, maximum=1 << 26)
    panels, summary = [], []
    for name, spec in rope_specs(encodings, "precision"):
        data = precision_data(spec, max_position)
        series = [Series(label, data["positions"], values) for label, values in data["series"].items()]
        panels.append(Panel(f"{name}: max |error| vs position", "position", "max |cos, sin - exact|", x_log=True,
                            y_log=True, series=series, y_floor=FLOOR))
        text = ", ".join(f"{k} {v['error']:.1e} (at {v['position']})" for k, v in data["worst"].items())
        summary.append({"label": name, "max_position": max_position, "worst_error": data["worst"],
                        "error_at_max_position": data["at_max"],
                        "text": f"{name}, worst over positions 1..{max_position}: {text}"})
    return Figure(panels, {"panels": summary})
