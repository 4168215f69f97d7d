"""Sinusoidal encodings as an image, positions x dims, one panel per layout: the stripes widen
with the dimension index (slower frequencies), the pattern every explanation of them shows."""

from __future__ import annotations

import numpy as np

from ..api import sinusoidal
from ..args import as_int
from ..encodings import SinusoidalSpec
from .render import figure
from .sources import of_kind

LAYOUTS = ("interleaved", "halves", "t2t")


def build(encodings, params: dict):
    specs = of_kind(encodings, "sinusoidal")
    n = as_int(params.get("positions", 256), "positions", minimum=2, maximum=4096)
    if specs:
        panels = [(name, spec) for name, spec in specs]
    else:
        dim = as_int(params.get("dim", 128), "dim", minimum=2, maximum=1024)
        panels = [(layout, SinusoidalSpec(dim, layout=layout)) for layout in LAYOUTS]
    fig, axes = figure(len(panels), width=4.2, height=3.6)
    summary = []
    for ax, (name, spec) in zip(axes[0], panels):
        table = sinusoidal(np.arange(n), spec.dim, **{k: v for k, v in spec.to_dict().items()
                                                      if k not in ("kind", "dim")})
        image = ax.imshow(table, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest",
                          origin="upper")
        prefix = "" if name == spec.layout else f"{name}: "
        ax.set_title(f"{prefix}{spec.layout}, dim {spec.dim}, base {spec.base:g}")
        ax.set_xlabel("dimension")
        ax.set_ylabel("position")
        ax.grid(False)
        summary.append({"label": name, "layout": spec.layout, "dim": spec.dim, "positions": n})
    fig.colorbar(image, ax=axes[0].tolist(), shrink=0.8)
    return fig, {"panels": summary}
