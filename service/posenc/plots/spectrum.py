"""RoPE spectrum: the wavelength 2*pi/inv_freq of every frequency against the trained and the
extended context, before and after the scaling, with each variant's regions (YaRN's ramp between
beta_fast and beta_slow, Llama-3's smoothing band, LongRoPE's per-frequency factors), one panel
per spec."""

from __future__ import annotations

import math

import numpy as np

from ..encodings.rope_scaling import VARIANTS
from ..encodings.rope_scaling._common import default_inv_freq
from .model import Band, Figure, Panel, Rule, Series
from .sources import rope_specs

PARAMS = ()


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


def summary_text(name: str, data: dict) -> str:
    n = len(data["index"])
    if data["trained_context"] is None:
        turns = f"{n} frequencies; no max_position_embeddings given, so full turns within a context are not counted"
    else:
        turns = f"{data['full_turns_before']} of {n} frequencies turn fully within the trained {data['trained_context']}"
        if data["rope_type"] != "default" and data["extended_context"] != data["trained_context"]:
            turns += f", {data['full_turns_after']} after scaling within the extended {data['extended_context']}"
    return f"{name}: {data['rope_type']}, {turns}, attention factor {data['attention_factor']:.4f}"


def build(encodings, params: dict) -> Figure:
    panels, summary = [], []
    for name, spec in rope_specs(encodings, "spectrum"):
        data = spectrum_data(spec)
        x = data["index"]
        series = [Series("unscaled", x, data["before"], "point")]
        if spec.rope_type != "default":
            series.append(Series("long_factor" if spec.rope_type == "longrope" else spec.rope_type, x, data["after"],
                                 "point"))
        if spec.rope_type == "longrope":  # "after" holds the long factors (beyond the trained length)
            series.append(Series("short_factor (within trained)", x,
                                 (np.asarray(data["before"]) * np.asarray(data["short_factor"])).tolist(), "point"))
        rules = []
        if data["trained_context"]:
            rules.append(Rule("y", data["trained_context"], f"trained {data['trained_context']}"))
        if data["extended_context"] and data["extended_context"] != data["trained_context"]:
            rules.append(Rule("y", data["extended_context"], f"extended {data['extended_context']}", dashed=True))
        bands = []
        if "yarn_ramp" in data:
            bands.append(Band("x", *data["yarn_ramp"], "YaRN ramp (beta_fast..beta_slow)"))
        if "llama3_band" in data:
            bands.append(Band("y", *data["llama3_band"], "Llama-3 smoothing band"))
        panels.append(Panel(f"{name}: base {spec.base:g}, d={spec.rotary_dim}", "frequency index i",
                            "wavelength 2π/θ_i (positions)", y_log=True, series=series, rules=rules, bands=bands))
        summary.append({"label": name, "text": summary_text(name, data),
                        **{k: v for k, v in data.items() if k not in ("index", "before", "after")}})
    return Figure(panels, {"panels": summary})
