"""RoPE long-range decay: Su et al.'s upper bound on |q.k| against the relative distance r,
(1/n) sum_j |sum_{k<j} exp(i r theta_k)| over the n frequencies, with and without the scaling."""

from __future__ import annotations

import numpy as np

from ..args import as_int
from ..encodings.rope_scaling._common import default_inv_freq
from .render import figure
from .sources import rope_specs
from .spectrum import context_lengths

POINTS = 320


def decay_bound(inv: np.ndarray, distances: np.ndarray) -> np.ndarray:
    """Su et al. (RoFormer, section 3.4.3): the relative upper bound of the q.k sum at each distance."""
    phases = np.exp(1j * np.outer(distances, inv))  # [r, n]
    partial = np.cumsum(phases, axis=1)
    return np.abs(partial).mean(axis=1)


def build(encodings, params: dict):
    specs = rope_specs(encodings)
    fig, axes = figure(len(specs))
    summary = []
    for ax, (name, spec) in zip(axes[0], specs):
        original, extended = context_lengths(spec)
        longest = as_int(params.get("max_distance", 4 * (extended or original or 8192)), "max_distance",
                         minimum=16, maximum=1 << 24)
        r = np.unique(np.geomspace(1, longest, POINTS).round())
        unscaled = decay_bound(default_inv_freq(spec.base, spec.rotary_dim), r)
        ax.semilogx(r, unscaled, color="tab:gray", lw=1, label="unscaled")
        if spec.rope_type != "default":
            scaled = decay_bound(spec.inv_freq(extended if spec.length_dependent else None)[0], r)
            ax.semilogx(r, scaled, color="tab:blue", lw=1, label=spec.rope_type)
        for length, style, what in ((original, "-", "trained"), (extended, "--", "extended")):
            if length:
                ax.axvline(length, color="tab:red", ls=style, lw=1, label=f"{what} {length}")
        ax.set_title(f"{name}: q·k upper bound vs distance")
        ax.set_xlabel("relative distance |m - n|")
        ax.set_ylabel("relative upper bound")
        ax.legend(fontsize=7)
        summary.append({"label": name, "max_distance": longest, "bound_at_1": float(unscaled[0]),
                        "bound_at_max_unscaled": float(unscaled[-1])})
    return fig, {"panels": summary}
