"""RoPE long-range decay: Su et al.'s upper bound on |q.k| against the relative distance r,
(1/n) sum_j |sum_{k<j} exp(i r theta_k)| over the n frequencies, with and without the scaling: one
panel per spec, or with `overlay` every spec's scaled bound on one axis (the unscaled bound once per
base and dimension). The summary gives each spec's own (scaled) bound."""

from __future__ import annotations

import numpy as np

from ..args import as_bool, as_int
from ..encodings.rope_scaling._common import default_inv_freq
from .model import Figure, Panel, Series
from .sources import rope_specs
from .spectrum import context_lengths, context_rules, overlay_names, rope_title, scaling_label, unscaled_references

POINTS = 320
PARAMS = ("max_distance", "overlay")


def decay_bound(inv: np.ndarray, distances: np.ndarray) -> np.ndarray:
    """Su et al. (RoFormer, section 3.4.3): the relative upper bound of the q.k sum at each distance."""
    phases = np.exp(1j * np.outer(distances, inv))  # [r, n]
    partial = np.cumsum(phases, axis=1)
    return np.abs(partial).mean(axis=1)


def _distances(longest: int) -> np.ndarray:
    return np.unique(np.geomspace(1, longest, POINTS).round())


def _max_distance(params: dict, spec) -> int:
    """The `max_distance` given, else 4 x the spec's longest context (8192 without one)."""
    original, extended = context_lengths(spec)
    return as_int(params.get("max_distance", 4 * (extended or original or 8192)), "max_distance", minimum=16,
                  maximum=1 << 24)


def _bounds(spec, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the spec's own bound, the bound of its unscaled frequencies) at the distances r."""
    unscaled = decay_bound(default_inv_freq(spec.base, spec.rotary_dim), r)
    if spec.rope_type == "default":
        return unscaled, unscaled
    _, extended = context_lengths(spec)
    return decay_bound(spec.inv_freq(extended if spec.length_dependent else None)[0], r), unscaled


def _summary(name: str, spec, longest: int, scaled: np.ndarray, unscaled: np.ndarray) -> dict:
    text = f"{name}, {scaling_label(spec)}: bound {scaled[0]:.1f} at distance 1, {scaled[-1]:.2f} at {longest}"
    if spec.rope_type != "default":
        text += f" (unscaled: {unscaled[0]:.1f}, {unscaled[-1]:.2f})"
    return {"label": name, "rope_type": spec.rope_type, "max_distance": longest, "bound_at_1": float(scaled[0]),
            "bound_at_max": float(scaled[-1]), "bound_at_1_unscaled": float(unscaled[0]),
            "bound_at_max_unscaled": float(unscaled[-1]), "text": text}


def _panel(title: str, series: list, variants) -> Panel:
    return Panel(title, "relative distance |m - n|", "relative upper bound", x_log=True, series=series,
                 rules=context_rules("x", variants))


def _side_by_side(variants, params: dict) -> Figure:
    panels, summary = [], []
    for name, spec in variants:
        longest = _max_distance(params, spec)
        r = _distances(longest)
        scaled, unscaled = _bounds(spec, r)
        series = [Series("unscaled", r, unscaled)]
        if spec.rope_type != "default":
            series.append(Series(spec.rope_type, r, scaled))
        panels.append(_panel(rope_title(name, spec), series, [(name, spec)]))
        summary.append(_summary(name, spec, longest, scaled, unscaled))
    return Figure(panels, {"panels": summary})


def _overlay(variants, params: dict) -> Figure:
    """One distance axis for all: the longest of the variants' max_distance."""
    longest = max(_max_distance(params, spec) for _, spec in variants)
    r = _distances(longest)
    shared, names = overlay_names(variants)
    series = [Series(legend, r, decay_bound(default_inv_freq(base, dim), r))
              for legend, base, dim in unscaled_references(variants)]
    summary = []
    for legend, (name, spec) in zip(names, variants):
        scaled, unscaled = _bounds(spec, r)
        series.append(Series(legend, r, scaled))
        summary.append(_summary(name, spec, longest, scaled, unscaled))
    return Figure([_panel(f"every variant on one axis{shared}", series, variants)],
                  {"panels": summary})


def build(encodings, params: dict) -> Figure:
    overlay = as_bool(params.get("overlay", False), "overlay")
    variants = rope_specs(encodings, "decay")
    return _overlay(variants, params) if overlay else _side_by_side(variants, params)
