"""Heatmap of the source's position tables, positions x columns, one panel per encoding:
sinusoidal tables as they are, RoPE as [cos | sin] of p * inv_freq_i (stripes widen with the index:
slower frequencies). Without a source, a sinusoid of `dim` in each of the three layouts."""

from __future__ import annotations

import numpy as np

from ..api import rope_cos_sin, sinusoidal
from ..args import as_int
from ..encodings import SinusoidalSpec
from ..errors import PosencError
from .model import Figure, Heat, Panel
from .sources import drawable
from .spectrum import scaling_label

LAYOUTS = ("interleaved", "halves", "t2t")
PARAMS = ("positions", "dim")
#: Cells one panel may hold (the page draws each as a rectangle).
MAX_CELLS = 1 << 18


def _table(spec, n: int) -> tuple[np.ndarray, str]:
    positions = np.arange(n)
    if spec.KIND == "sinusoidal":
        table = sinusoidal(positions, spec.dim, **{k: v for k, v in spec.to_dict().items() if k not in ("kind", "dim")})
        return table, f"{spec.layout}, dim {spec.dim}, base {spec.base:g}"
    cos, sin = rope_cos_sin(positions, spec, dtype="float64")
    return np.concatenate([cos, sin], axis=1), f"RoPE [cos | sin], {scaling_label(spec)}, base {spec.base:g}, " \
                                               f"d={spec.rotary_dim}"


def build(encodings, params: dict) -> Figure:
    n = as_int(params.get("positions", 256), "positions", minimum=2, maximum=4096)
    if encodings:
        if "dim" in params:
            raise PosencError("params.dim", "comes from the source's specs; give it only without a source")
        panels = drawable(encodings, ("sinusoidal", "rope"), "heatmap")
    else:
        dim = as_int(params.get("dim", 128), "dim", minimum=2, maximum=1024)
        panels = [(layout, SinusoidalSpec(dim, layout=layout)) for layout in LAYOUTS]
    out, summary = [], []
    for name, spec in panels:
        table, what = _table(spec, n)
        if table.size > MAX_CELLS:
            raise PosencError("params.positions", f"{n} positions x {table.shape[1]} columns is over {MAX_CELLS} "
                              "cells: draw fewer positions")
        scale = max(1.0, float(np.abs(table).max()))
        out.append(Panel(title=f"{name}: {what}", x_label="column", y_label="position",
                         heat=Heat(table.round(6).tolist(), -scale, scale)))
        summary.append({"label": name, "kind": spec.KIND, "columns": int(table.shape[1]), "positions": n,
                        "text": f"{name}: {what}, {n} positions x {table.shape[1]} columns"})
    return Figure(out, {"panels": summary})
