"""ALiBi: slopes per head, the bias against distance, and the attention entropy each head gets
from the bias alone at a context length (softmax of -gamma*m*d over d = 0..L-1 with flat
content scores), heads under 1.0 nat flagged: they see only a few tokens. Drawn for the source's
ALiBi encodings (its heads and variant); without a source, every variant at `n_heads`."""

from __future__ import annotations

import math

import numpy as np

from ..api import alibi_slopes
from ..args import as_float, as_int
from ..encodings import ALIBI_VARIANTS
from ..errors import PosencError
from .model import Figure, Panel, Rule, Series
from .sources import drawable

FLAG_NATS = 1.0
PARAMS = ("n_heads", "context", "gamma")


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


def build(encodings, params: dict) -> Figure:
    context = as_int(params.get("context", 2048), "context", minimum=2, maximum=1 << 24)
    gamma = as_float(params.get("gamma", 1.0), "gamma", exclusive_minimum=0.0, maximum=1e3)
    if encodings:
        if "n_heads" in params:
            raise PosencError("params.n_heads", "comes from the source's ALiBi spec; give it only without a source")
        entries = [(name, spec.n_heads, spec.variant) for name, spec in drawable(encodings, ("alibi",), "ALiBi")]
    else:
        n_heads = as_int(params.get("n_heads", 32), "n_heads", minimum=1, maximum=256)
        entries = [(variant, n_heads, variant) for variant in ALIBI_VARIANTS]
    slopes_series, entropy_series, variants, lines = [], [], {}, []
    for name, n_heads, variant in entries:
        heads = np.arange(1, n_heads + 1)
        slopes = alibi_slopes(n_heads, variant=variant)
        entropy = bias_entropy(slopes, context, gamma)
        flagged = [int(h) for h in heads[entropy < FLAG_NATS]]
        slopes_series.append(Series(name, heads, slopes, "point"))
        entropy_series.append(Series(name, heads, entropy, "point"))
        variants[name] = {"n_heads": n_heads, "variant": variant, "slopes": slopes.tolist(),
                          "entropy_nats": entropy.tolist(), "flagged_heads": flagged}
        lines.append(f"{name} ({variant}, {n_heads} heads): " +
                     (f"heads {', '.join(map(str, flagged))} below {FLAG_NATS:g} nat" if flagged else
                      f"no head below {FLAG_NATS:g} nat"))
    name, n_heads, variant = entries[0]
    first = np.asarray(variants[name]["slopes"])
    distance = np.arange(0, min(context, 4096))
    bias = [Series(f"head {h + 1} (m={first[h]:.3g})", distance, -gamma * first[h] * distance)
            for h in sorted({0, n_heads // 2, n_heads - 1})]
    panels = [Panel("slopes per head", "head", "slope m", y_log=True, series=slopes_series),
              Panel(f"bias -γ·m·d ({name}, γ={gamma:g})", "distance d", "bias", series=bias),
              Panel(f"entropy at L={context}", "head", "entropy (nats)", series=entropy_series,
                    rules=[Rule("y", FLAG_NATS, f"{FLAG_NATS:g} nat"),
                           Rule("y", math.log(context), f"ln {context} (uniform)", dashed=True)])]
    summary = {"context": context, "gamma": gamma, "flag_below_nats": FLAG_NATS, "variants": variants,
               "text": "\n".join(lines) + f" (context {context}, γ {gamma:g})"}
    return Figure(panels, summary)
