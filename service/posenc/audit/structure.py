"""Checks of what the cache is against what the config says the model needs: layout, rotary
dim, base and scaling, attention factor, position offset, length. Each mismatch is a Finding."""

from __future__ import annotations

import math

from ..encodings import RopeSpec
from .findings import Finding
from .infer import Inferred, match_score
from .observe import Observation


def _attention_tol(obs: Observation) -> float:
    return max(4 * obs.floor / max(obs.attention, 1e-300), 1e-4)


def describe(spec: RopeSpec) -> str:
    scaling = "" if spec.rope_type == "default" else \
        ", " + ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                         for k, v in spec.scaling.items() if not isinstance(v, list))
    return f"base {spec.base:g}, rotary dim {2 * spec.n_freq}{scaling}"


def layout_findings(obs: Observation, expected_apply: str | None) -> list[Finding]:
    out = []
    if expected_apply in ("half", "interleaved") and obs.layout in ("half", "interleaved") \
            and obs.layout != expected_apply:
        out.append(Finding("wrong_layout", f"the cache is {obs.layout} ({'[c | c]' if obs.layout == 'half' else '[c0 c0 c1 c1 ...]'}) "
                           f"but the config's model rotates {expected_apply} pairs"))
    return out


def frequency_findings(obs: Observation, expected: RopeSpec, inferred: Inferred, what: str = "the cache") \
        -> list[Finding]:
    """Only called when the expected frequencies do not explain the values. `obs` needs n_freq, layout, width,
    omega and omega_tol (a GGUF's frequencies come as one too); `what` names the thing audited."""
    got = inferred.spec
    k = obs.n_freq
    if 2 * k == expected.n_freq and obs.layout == "interleaved" and \
            match_score(obs.omega, obs.omega_tol, expected.inv_freq()[0][:k]) <= 1:
        return [Finding("interleaved_read_as_half", f"the {obs.width} columns are [c0 c0 c1 c1 ...] of only the "
                        f"first {k} of the config's {expected.n_freq} frequencies: the first half of an "
                        "interleaved cache, taken as a half-split one")]
    if expected.n_freq != obs.n_freq:
        return [Finding("wrong_rotary_dim", f"{what} has {obs.n_freq} frequencies (rotary dim {2 * obs.n_freq}); "
                        f"the config gives {expected.n_freq} (head_dim {expected.head_dim} x "
                        f"partial_rotary_factor {expected.partial_rotary_factor:g})")]
    confidence = "high" if inferred.score <= 1 else "medium"
    if abs(got.base / expected.base - 1) > 1e-3:
        extra = "" if got.rope_type == expected.rope_type else f" (and {inferred.description} vs the config's " \
                                                               f"{expected.rope_type})"
        return [Finding("wrong_base", f"the frequencies fit base {got.base:g}; the config's rope_theta is "
                        f"{expected.base:g}{extra}", confidence)]
    if got.rope_type == "default" and expected.rope_type != "default":
        return [Finding("scaling_missing", f"the frequencies are plain RoPE at base {got.base:g}; the config "
                        f"asks for {expected.rope_type} scaling ({describe(expected)})", confidence)]
    return [Finding("wrong_scaling", f"the frequencies fit {inferred.description}; the config asks for "
                    f"{describe(expected)}", confidence)]


def attention_findings(obs: Observation, expected_attention: float | None, inferred: Inferred) -> list[Finding]:
    tol = _attention_tol(obs)
    a = obs.attention
    if expected_attention is None:
        spec = inferred.spec
        if spec.rope_type == "yarn" and inferred.score <= 1 and abs(a - 1) <= tol:
            mscale = spec.inv_freq()[1]
            return [Finding("attention_factor_missing", f"the frequencies are {inferred.description}, whose "
                            f"attention factor is {mscale:.4f}, but cos^2 + sin^2 = 1 (factor 1.0); without a "
                            "config this is a guess (an explicit attention_factor of 1 would do the same)",
                            "medium")]
        return []
    if abs(a / expected_attention - 1) <= tol:
        return []
    if abs(a - 1) <= tol:
        return [Finding("attention_factor_missing", f"cos^2 + sin^2 = 1 (factor 1.0); the config's scaling needs "
                        f"{expected_attention:.6g} on cos and sin")]
    return [Finding("wrong_attention_factor", f"the cache carries attention factor {a:.6g}; the config's "
                    f"scaling needs {expected_attention:.6g}" +
                    (" (applied twice)" if abs(a / expected_attention ** 2 - 1) <= tol else ""))]


def offset_findings(offset: float, start: int, with_config: bool) -> list[Finding]:
    if offset == 0:
        return []
    where = "declared start" if start else "row index"
    return [Finding("position_offset", f"row r holds position r {offset:+g} (the phases of every frequency agree "
                    f"on it), not the {where}", "high" if with_config and float(offset).is_integer() else "medium")]


def length_findings(obs: Observation, start: int, expected: RopeSpec) -> list[Finding]:
    max_len = expected.max_position_embeddings
    if max_len is None or start + obs.rows >= max_len:
        return []
    return [Finding("truncated", f"the cache covers positions {start}..{start + obs.rows - 1} but the config's "
                    f"max_position_embeddings is {max_len}: positions from {start + obs.rows} on have no row",
                    severity="warning")]


def storage_findings(obs: Observation, dtype: str) -> list[Finding]:
    if obs.grid not in ("float16", "bfloat16"):
        return []
    cause = "fp16_storage" if obs.grid == "float16" else "bf16_storage"
    how = f"the file is {dtype}" if dtype == obs.grid else f"every value lies on the {obs.grid} grid (the " \
                                                          f"{dtype} file holds {obs.grid} values)"
    bound = 2.0 ** -(11 if obs.grid == "float16" else 8)
    return [Finding(cause, f"{how}: each value is off by up to {bound:.1e}", severity="warning")]


def nearest_integer(x: float) -> float:
    r = round(x)
    return float(r) if abs(x - r) < 0.05 else float(x) if math.isfinite(x) else 0.0
