"""ALiBi: slopes per head for each variant, the bias against distance, and the attention
entropy each head gets from the bias alone at a context length (softmax of -gamma*m*d over
d = 0..L-1 with flat content scores), heads under 1.0 nat flagged: they see only a few tokens."""

from __future__ import annotations

import math

import numpy as np

from ..api import alibi_slopes
from ..args import as_float, as_int
from ..encodings import ALIBI_VARIANTS
from .render import figure
from .sources import of_kind

FLAG_NATS = 1.0


def bias_entropy(slopes: np.ndarray, context: int, gamma: float = 1.0) -> np.ndarray:
    """Entropy (nats) of softmax(-a d), d = 0..L-1, a = gamma*m: closed form of the geometric distribution.

    With x = e^-a: Z = (1 - x^L)/(1 - x), E[d] = x/(1 - x) - L x^L/(1 - x^L), H = ln Z + a E[d]."""
    a = gamma * np.asarray(slopes, dtype=np.float64)
    out = np.empty_like(a)
    for i, ai in enumerate(a):
        if ai * context < 1e-6:  # nearly flat: ln L minus the tiny tilt
            out[i] = math.log(context)
            continue
        one_minus_x = -math.expm1(-ai)
        xl = math.exp(-ai * context)
        one_minus_xl = -math.expm1(-ai * context)
        mean = math.exp(-ai) / one_minus_x - context * xl / one_minus_xl
        out[i] = math.log(one_minus_xl / one_minus_x) + ai * mean
    return out


def build(encodings, params: dict):
    specs = of_kind(encodings, "alibi")
    n_heads = specs[0][1].n_heads if specs else as_int(params.get("n_heads", 32), "n_heads", minimum=1, maximum=256)
    context = as_int(params.get("context", 2048), "context", minimum=2, maximum=1 << 24)
    gamma = as_float(params.get("gamma", 1.0), "gamma", exclusive_minimum=0.0, maximum=1e3)
    variants = list(ALIBI_VARIANTS)
    fig, axes = figure(3, width=4.0)
    slopes_ax, bias_ax, entropy_ax = axes[0]
    heads = np.arange(1, n_heads + 1)
    summary = {"n_heads": n_heads, "context": context, "gamma": gamma, "flag_below_nats": FLAG_NATS, "variants": {}}
    for variant, marker in zip(variants, "osD^"):
        slopes = alibi_slopes(n_heads, variant=variant)
        entropy = bias_entropy(slopes, context, gamma)
        slopes_ax.semilogy(heads, slopes, marker, ms=3, label=variant)
        entropy_ax.plot(heads, entropy, marker + "-", ms=3, lw=0.8, label=variant)
        flagged = [int(h) for h in heads[entropy < FLAG_NATS]]
        summary["variants"][variant] = {"slopes": slopes.tolist(), "entropy_nats": entropy.tolist(),
                                        "flagged_heads": flagged}
    paper = alibi_slopes(n_heads, variant="paper")
    distance = np.arange(0, min(context, 4096))
    for h in sorted({0, n_heads // 2, n_heads - 1}):
        bias_ax.plot(distance, -gamma * paper[h] * distance, lw=1, label=f"head {h + 1} (m={paper[h]:.3g})")
    entropy_ax.axhline(FLAG_NATS, color="tab:red", lw=1, label=f"{FLAG_NATS:g} nat")
    entropy_ax.axhline(math.log(context), color="tab:gray", ls="--", lw=1, label=f"ln {context} (uniform)")
    slopes_ax.set(title=f"slopes, {n_heads} heads", xlabel="head", ylabel="slope m")
    bias_ax.set(title=f"bias -γ·m·d (paper, γ={gamma:g})", xlabel="distance d", ylabel="bias")
    flagged = summary["variants"]["paper"]["flagged_heads"]
    entropy_ax.set(title=f"entropy at L={context} (paper: {len(flagged)} < {FLAG_NATS:g} nat)", xlabel="head",
                   ylabel="entropy (nats)")
    for ax in axes[0]:
        ax.legend(fontsize=7)
    return fig, summary
