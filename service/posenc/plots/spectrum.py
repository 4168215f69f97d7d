"""RoPE spectrum: the wavelength 2*pi/inv_freq of every frequency against the trained context,
before and after the scaling, with each variant's regions (YaRN's ramp between beta_fast and
beta_slow, Llama-3's smoothing band, LongRoPE's per-frequency factors), one panel per spec."""

from __future__ import annotations

import math

import numpy as np

from ..encodings.rope_scaling import VARIANTS
from ..encodings.rope_scaling._common import default_inv_freq
from .render import figure
from .sources import rope_specs


def context_lengths(spec) -> tuple[int | None, int | None]:
    """(trained context, extended context) of a spec: the extension is max_position_embeddings or
    factor x trained, whichever is longer (Qwen2-YaRN configs keep max_position_embeddings at the trained 32768)."""
    original = spec.original_max_position_embeddings or spec.max_position_embeddings
    factor = spec.scaling_params.get("factor")
    stretched = int(round(factor * original)) if factor and original and spec.rope_type != "proportional" else None
    candidates = [v for v in (spec.max_position_embeddings, stretched) if v]
    return original, max(candidates) if candidates else None


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
    reach = extended or original
    if reach:
        out["full_turns_after"] = int(np.sum(wl_after <= reach))
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


def build(encodings, params: dict):
    specs = rope_specs(encodings)
    fig, axes = figure(len(specs))
    summary = []
    for ax, (name, spec) in zip(axes[0], specs):
        data = spectrum_data(spec)
        x = data["index"]
        turns = ""
        if "full_turns_before" in data:
            turns = f" ({data['full_turns_before']} turns within {data['trained_context']})"
        ax.semilogy(x, data["before"], "o", ms=2.5, color="tab:gray", label=f"unscaled{turns}")
        if spec.rope_type != "default":
            after_turns = f" ({data['full_turns_after']} within {data['extended_context'] or data['trained_context']})" \
                if "full_turns_after" in data else ""
            name_after = "long_factor" if spec.rope_type == "longrope" else spec.rope_type
            ax.semilogy(x, data["after"], "o", ms=2.5, color="tab:blue", label=f"{name_after}{after_turns}")
        if spec.rope_type == "longrope":  # "after" holds the long factors (beyond the trained length)
            short = np.asarray(data["before"]) * np.asarray(data["short_factor"])
            ax.semilogy(x, short, "x", ms=2.5, color="tab:purple", label="short_factor (within trained)")
        if data["trained_context"]:
            ax.axhline(data["trained_context"], color="tab:red", lw=1, label=f"trained {data['trained_context']}")
        if data["extended_context"] and data["extended_context"] != data["trained_context"]:
            ax.axhline(data["extended_context"], color="tab:orange", lw=1, ls="--",
                       label=f"extended {data['extended_context']}")
        if "yarn_ramp" in data:
            ax.axvspan(*data["yarn_ramp"], color="tab:green", alpha=0.15, label="YaRN ramp (beta_fast..beta_slow)")
        if "llama3_band" in data:
            ax.axhspan(*data["llama3_band"], color="tab:green", alpha=0.15, label="Llama-3 smoothing band")
        ax.set_title(f"{name}: base {spec.base:g}, d={spec.rotary_dim}")
        ax.set_xlabel("frequency index i")
        ax.set_ylabel("wavelength 2π/θ_i (positions)")
        ax.legend(fontsize=7, loc="upper left")
        summary.append({"label": name, **{k: v for k, v in data.items() if k not in ("index", "before", "after")}})
    return fig, {"panels": summary}
