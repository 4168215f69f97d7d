"""RoPE spectrum: the wavelength 2*pi/inv_freq of every frequency against the trained and the
extended context, before and after the scaling, with each variant's regions (YaRN's ramp between
beta_fast and beta_slow, Llama-3's smoothing band, LongRoPE's per-frequency factors): one panel
per spec, or with `overlay` every spec on one axis (its scaled wavelengths, the unscaled ones once per
base and dimension), told apart by the legend."""

from __future__ import annotations

import math

import numpy as np

from ..args import as_bool
from ..encodings.rope_scaling import VARIANTS
from ..encodings.rope_scaling._common import default_inv_freq
from .model import Band, Figure, Panel, Rule, Series
from .sources import rope_specs

PARAMS = ("overlay",)


def context_lengths(spec) -> tuple[int | None, int | None]:
    """(trained context, extended context) of a spec.

    With original_max_position_embeddings (YaRN, Llama-3, LongRoPE) that is the trained length and the
    extension is the longer of max_position_embeddings and factor x trained (Qwen2-YaRN configs keep
    max_position_embeddings at the trained 32768). Without it, linear scaling's max_position_embeddings is
    already the extended length (Gemma-3: 131072 = 8 x 16384 trained), and dynamic NTK's is the trained one
    (it grows beyond it). Other variants: max_position_embeddings is both."""
    factor = spec.scaling_params.get("factor")
    original, longest = spec.original_max_position_embeddings, spec.max_position_embeddings
    if original:
        stretched = round(factor * original) if factor else original
        return original, max(longest or 0, stretched)
    if longest and factor and spec.rope_type == "linear":
        return round(longest / factor), longest
    if longest and factor and spec.rope_type == "dynamic":
        return longest, round(factor * longest)
    return longest, longest


def spectrum_data(spec) -> dict:
    original, extended = context_lengths(spec)
    before = default_inv_freq(spec.base, spec.rotary_dim)
    seq_len = extended if spec.length_dependent and extended else None
    after, attention = spec.inv_freq(seq_len)
    with np.errstate(divide="ignore"):
        wl_before, wl_after = 2 * math.pi / before, 2 * math.pi / after
    out = {"index": list(range(len(before))), "before": wl_before.tolist(),
           "after": np.where(np.isfinite(wl_after), wl_after, np.nan).tolist(),
           "trained_context": original, "extended_context": extended, "attention_factor": attention,
           "rope_type": spec.rope_type}
    if original:
        out["full_turns_before"] = int(np.sum(wl_before <= original))
    if extended:
        out["full_turns_after"] = int(np.sum(wl_after <= extended))
    params, dims = spec.scaling_params, spec.dims
    if spec.rope_type == "yarn":
        low, high = VARIANTS["yarn"].correction_range(dims, params)
        out["yarn_ramp"] = [float(low), float(high)]
    elif spec.rope_type == "llama3":
        out["llama3_band"] = [spec.original_max_position_embeddings / params["high_freq_factor"],
                              spec.original_max_position_embeddings / params["low_freq_factor"]]
    elif spec.rope_type == "longrope":
        out["long_factor"] = list(params["long_factor"])
        out["short_factor"] = list(params["short_factor"])
    return out


def scaling_label(spec) -> str:
    """A RoPE spec's scaling in a few words, for titles, legends and summaries: "no scaling",
    "linear ×8 (orig 16384)", "yarn ×4 (orig 32768)"; orig is the trained context (context_lengths)."""
    if spec.rope_type == "default":
        return "no scaling"
    factor = spec.scaling_params.get("factor")
    trained, _ = context_lengths(spec)
    return spec.rope_type + (f" ×{factor:g}" if factor else "") + (f" (orig {trained})" if trained else "")


def rope_title(name: str, spec) -> str:
    """"rope 1: yarn ×4 (orig 8192), base 500000, d=128": a panel's title, and its rows' `panel` in the CSV."""
    return f"{name}: {scaling_label(spec)}, base {spec.base:g}, d={spec.rotary_dim}"


def overlay_names(variants) -> tuple[str, list[str]]:
    """(what every variant shares, for the overlay's title; each variant's legend name): the base and rotary
    dimension go into the title when all variants have the same, else into every legend name."""
    shared = {(spec.base, spec.rotary_dim) for _, spec in variants}
    if len(shared) == 1:
        base, dim = shared.pop()
        return f", base {base:g}, d={dim}", [f"{name}: {scaling_label(spec)}" for name, spec in variants]
    return "", [rope_title(name, spec) for name, spec in variants]


def unscaled_references(variants) -> list[tuple[str, float, int]]:
    """(legend name, base, rotary dim) of the unscaled frequencies an overlay draws for reference: once per base
    and dimension of a scaled variant, unless an unscaled variant of that base and dimension is drawn already."""
    drawn = {(spec.base, spec.rotary_dim) for _, spec in variants if spec.rope_type == "default"}
    wanted = list(dict.fromkeys((spec.base, spec.rotary_dim) for _, spec in variants
                                if spec.rope_type != "default" and (spec.base, spec.rotary_dim) not in drawn))
    one = len({(spec.base, spec.rotary_dim) for _, spec in variants}) == 1
    return [("unscaled" if one else f"unscaled, base {base:g}, d={dim}", base, dim) for base, dim in wanted]


def context_rules(axis: str, variants) -> list[Rule]:
    """The trained (solid) and extended (dashed) context lengths of the variants, each length once, naming the
    variants it belongs to when not all of them share it."""
    owners = {}
    for name, spec in variants:
        trained, extended = context_lengths(spec)
        if trained:
            owners.setdefault(("trained", trained), []).append(name)
        if extended and extended != trained:
            owners.setdefault(("extended", extended), []).append(name)
    return [Rule(axis, length, f"{what} {length}" + (f" ({', '.join(names)})" if len(names) < len(variants) else ""),
                 dashed=what == "extended") for (what, length), names in owners.items()]


def summary_text(name: str, spec, data: dict) -> str:
    n = len(data["index"])
    if data["trained_context"] is None:
        turns = f"{n} frequencies; no max_position_embeddings given, so full turns within a context are not counted"
    else:
        turns = f"{data['full_turns_before']} of {n} frequencies turn fully within the trained {data['trained_context']}"
        if data["rope_type"] != "default" and data["extended_context"] != data["trained_context"]:
            turns += f", {data['full_turns_after']} after scaling within the extended {data['extended_context']}"
    return f"{rope_title(name, spec)}; {turns}, attention factor {data['attention_factor']:.4f}"


def _scaled_name(spec) -> str:
    return "long_factor" if spec.rope_type == "longrope" else spec.rope_type


def _bands(data: dict, prefix: str = "") -> list[Band]:
    bands = []
    if "yarn_ramp" in data:
        bands.append(Band("x", *data["yarn_ramp"], f"{prefix}YaRN ramp (beta_fast..beta_slow)"))
    if "llama3_band" in data:
        bands.append(Band("y", *data["llama3_band"], f"{prefix}Llama-3 smoothing band"))
    return bands


def _panel(title: str, series: list, rules: list, bands: list) -> Panel:
    return Panel(title, "frequency index i", "wavelength 2π/θ_i (positions)", y_log=True, series=series, rules=rules,
                 bands=bands)


def _side_by_side(drawn) -> list[Panel]:
    panels = []
    for name, spec, data in drawn:
        x = data["index"]
        series = [Series("unscaled", x, data["before"], "point")]
        if spec.rope_type != "default":
            series.append(Series(_scaled_name(spec), x, data["after"], "point"))
        if spec.rope_type == "longrope":  # "after" holds the long factors (beyond the trained length)
            series.append(Series("short_factor (within trained)", x,
                                 (np.asarray(data["before"]) * np.asarray(data["short_factor"])).tolist(), "point"))
        panels.append(_panel(rope_title(name, spec), series, context_rules("y", [(name, spec)]), _bands(data)))
    return panels


def _overlay(drawn) -> Panel:
    variants = [(name, spec) for name, spec, _ in drawn]
    shared, names = overlay_names(variants)
    series = []
    for legend, base, dim in unscaled_references(variants):
        inv = default_inv_freq(base, dim)
        series.append(Series(legend, np.arange(inv.size), 2 * math.pi / inv, "point"))
    bands = []
    for legend, (name, spec, data) in zip(names, drawn):
        scaled = legend + (f", {_scaled_name(spec)}" if spec.rope_type == "longrope" else "")
        series.append(Series(scaled, data["index"], data["after"], "point"))
        bands += _bands(data, f"{name}: ")
    return _panel(f"every variant on one axis{shared}", series, context_rules("y", variants), bands)


def build(encodings, params: dict) -> Figure:
    overlay = as_bool(params.get("overlay", False), "overlay")
    drawn = [(name, spec, spectrum_data(spec)) for name, spec in rope_specs(encodings, "spectrum")]
    summary = [{"label": name, "text": summary_text(name, spec, data),
                **{k: v for k, v in data.items() if k not in ("index", "before", "after")}}
               for name, spec, data in drawn]
    return Figure([_overlay(drawn)] if overlay else _side_by_side(drawn), {"panels": summary})
