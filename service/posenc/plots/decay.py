"""RoPE long-range decay: Su et al.'s upper bound on |q.k| against the relative distance r,
(1/n) sum_j |sum_{k<j} exp(i r theta_k)| over the n frequencies, with and without the scaling."""

from __future__ import annotations

import numpy as np

from ..args import as_int
from ..encodings.rope_scaling._common import default_inv_freq
from .model import Figure, Panel, Rule, Series
from .sources import rope_specs
from .spectrum import context_lengths

POINTS = 320
PARAMS = ("max_distance",)


def decay_bound(inv: np.ndarray, distances: np.ndarray) -> np.ndarray:
    """Su et al. (RoFormer, section 3.4.3): the relative upper bound of the q.k sum at each distance."""
    phases = np.exp(1j * np.outer(distances, inv))  # [r, n]
    partial = np.cumsum(phases, axis=1)
    return np.abs(partial).mean(axis=1)


def build(encodings, params: dict) -> Figure:
    panels, summary = [], []
    for name, spec in rope_specs(encodings, "decay"):
        original, extended = context_lengths(spec)
        longest = as_int(params.get("max_distance", 4 * (extended or original or 8192)), "max_distance",
                         minimum=16, maximum=1 << 24)
        r = np.unique(np.geomspace(1, longest, POINTS).round())
        unscaled = decay_bound(default_inv_freq(spec.base, spec.rotary_dim), r)
        series = [Series("unscaled", r, unscaled)]
        if spec.rope_type != "default":
            series.append(Series(spec.rope_type, r, decay_bound(spec.inv_freq(extended if spec.length_dependent
                                                                              else None)[0], r)))
        rules = [Rule("x", length, f"{what} {length}", dashed=what == "extended")
                 for length, what in ((original, "trained"), (extended, "extended")) if length]
        if len(rules) == 2 and rules[0].value == rules[1].value:
            rules = rules[:1]
        panels.append(Panel(f"{name}: q·k upper bound vs distance", "relative distance |m - n|",
                            "relative upper bound", x_log=True, series=series, rules=rules))
        summary.append({"label": name, "max_distance": longest, "bound_at_1": float(unscaled[0]),
                        "bound_at_max_unscaled": float(unscaled[-1]),
                        "text": f"{name}: bound {unscaled[0]:.1f} at distance 1, {unscaled[-1]:.2f} at {longest} "
                                "(unscaled)"})
    return Figure(panels, {"panels": summary})
