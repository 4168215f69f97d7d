"""Picking for a new model: which scheme to train with. The comparison is the lab's: every scheme it
trains, at the training length (no extrapolation needed) or at the ratio the model must reach past it.
A results file from another run changes the answer where its numbers differ."""

from __future__ import annotations

import math

from ..encodings import AlibiSpec, RopeSpec
from .answer import Pick, Reason
from .evidence import LabFile
from .scenario import Scenario
from .sources import cite

#: The schemes the lab trains a model with (the test-time scalings evaluate the RoPE model).
TRAINED = ("rope", "alibi", "rope_alibi", "sinusoidal", "learned", "nope")
#: The test-time RoPE scalings the lab measures (each evaluates the model trained with plain RoPE).
TEST_TIME = ("rope_linear", "rope_ntk", "rope_dynamic", "rope_yarn")
#: RoPE is kept when it is within this fraction of the best perplexity at the training length: it is the
#: one scheme a later context extension (PI, YaRN) applies to.
TIE = 0.02
#: RoFormer's base, the least pick recommends.
ROFORMER_BASE = 10000.0


def base_bound(context: int) -> float:
    """Men et al. (2024), Figure 1: the fitted lower bound of RoPE's base for a context length."""
    return 0.0424 * context**1.628


def rope_base(context: int) -> float:
    """The bound rounded up to one significant digit, and never below RoFormer's 10000."""
    bound = base_bound(context)
    scale = 10.0 ** math.floor(math.log10(bound))
    return max(ROFORMER_BASE, math.ceil(bound / scale - 1e-12) * scale)


def rope_base_reason(context: int, base: float) -> Reason:
    return Reason(f"base {base:g}: Men et al. fit the lower bound of RoPE's base for {context:,} positions as "
                  f"{base_bound(context):.3g}; pick rounds it up to one significant digit (and never below "
                  f"RoFormer's 10000). Published models sit above their bound: Llama 3 trains 8,192 positions with "
                  f"base 500000 (bound {base_bound(8192):.3g}); Code Llama fine-tunes 16,384 with 1,000,000 "
                  f"(bound {base_bound(16384):.3g}).",
                  (cite("men2024"), cite("llama3_config"), cite("roziere2023")))


def _alibi_parameters(scenario: Scenario) -> tuple[dict, dict | None]:
    """The slopes for the scenario's heads (their formula when n_heads is not given) and posenc's spec."""
    if scenario.n_heads is None:
        return ({"slopes": "2^(-8i/n) for heads i = 1..n (n a power of two; others interleave the next power's); "
                           "give n_heads for the values"}, None)
    spec = AlibiSpec(scenario.n_heads)
    return {"n_heads": scenario.n_heads, "slopes": spec.slopes.tolist()}, spec.to_dict()


def _parameters(scheme: str, scenario: Scenario) -> tuple[dict, dict | None, list[Reason]]:
    """(parameters, posenc spec or None, reasons for the parameters) of a trained scheme."""
    target = scenario.target_context
    if scheme in ("rope", "rope_alibi"):
        base = rope_base(target)
        rope = RopeSpec(scenario.head_dim, base=base, max_position_embeddings=target)
        params = {"base": base, "head_dim": scenario.head_dim, "max_position_embeddings": target}
        reasons = [rope_base_reason(target, base)]
        if scheme == "rope":
            return params, rope.to_dict(), reasons
        alibi, _ = _alibi_parameters(scenario)
        return params | {"alibi": alibi}, None, reasons
    if scheme == "alibi":
        params, spec = _alibi_parameters(scenario)
        return params, spec, []
    if scheme == "sinusoidal":
        return {"base": ROFORMER_BASE}, None, []
    if scheme == "learned":
        return {"num_positions": target}, None, []
    return {}, None, []


def _summary(scheme: str, params: dict) -> str:
    return {"rope": f"RoPE, base {params.get('base', 0):g}",
            "rope_alibi": f"RoPE (base {params.get('base', 0):g}) with the ALiBi bias",
            "alibi": "ALiBi", "sinusoidal": "the sinusoidal table added to the embeddings",
            "learned": f"a learned absolute table of {params.get('num_positions')} rows",
            "nope": "no positional encoding (causal mask only)"}[scheme]


def _latency_reasons(scheme: str, scenario: Scenario) -> list[Reason]:
    if scenario.latency != "tight" or "alibi" not in scheme:
        return []
    heads = scenario.n_heads or 1
    gib = heads * scenario.target_context**2 * 2 / 2**30
    return [Reason(f"latency: use a kernel that adds the ALiBi bias inside attention (flash-attention takes "
                   f"alibi_slopes); a materialized bf16 bias for {scenario.target_context:,} positions is "
                   f"{gib:,.1f} GiB per layer and sequence ({heads} head{'s' if heads > 1 else ''}).",
                   (cite("flash_attn_alibi"),))]


def pick_train(scenario: Scenario, lab: LabFile) -> Pick:
    task = "lm"
    train_len = lab.train_len(task)
    notes = []
    if scenario.extrapolate:
        ratio = (scenario.target_context / scenario.train_context if scenario.train_context
                 else lab.longest_ratio(task))
        length = lab.length_for(task, ratio)
        best = lab.best(task, list(TRAINED), length)
        others = [name for name in TRAINED if name != best and lab.has(task, name)]
        evidence = [lab.cite(task, best, train_len), lab.cite(task, best, length)]
        text = (f"Trained at one length and evaluated at {length / train_len:g}x it, {best} kept the lowest "
                f"perplexity of the schemes the lab trains ({evidence[0]['value']:.2f} at the training length, "
                f"{evidence[1]['value']:.2f} at {length / train_len:g}x)")
        if others:
            runner = lab.best(task, others, length)
            evidence.append(lab.cite(task, runner, length))
            text += f"; the next best, {runner}, reached {evidence[-1]['value']:.2f}"
        reasons = [Reason(text + ".", tuple(evidence))]
        if lab.has("copy", best):
            copy_len = lab.length_for("copy", ratio)
            point = lab.cite("copy", best, copy_len)
            reasons.append(Reason(f"On the copy task, which needs exact positions, {best} scored "
                                  f"{point['value']:.3f} token accuracy at {copy_len / lab.train_len('copy'):g}x "
                                  f"its training length (chance {lab.chance('copy'):.3f}).", (point,)))
        if "alibi" in best:
            reasons.append(Reason("The same effect at scale: a 1.3B-parameter ALiBi model trained on 1024 tokens "
                                  "matched, at 2048, a sinusoidal model trained on 2048.", (cite("press2022"),)))
        if ratio > lab.longest_ratio(task) + 1e-9:
            notes.append(Reason(f"The target is {ratio:g}x the training length; the lab measured up to "
                                f"{lab.longest_ratio(task):g}x.", (lab.cite(task, best, length),)))
        scheme = best
    else:
        present = [name for name in TRAINED if lab.has(task, name)]
        best = lab.best(task, present, train_len)
        best_point = lab.cite(task, best, train_len)
        scheme = best
        if "rope" in present and lab.value(task, "rope", train_len) <= (1 + TIE) * best_point["value"]:
            scheme = "rope"
        chosen = lab.cite(task, scheme, train_len)
        text = (f"Where the model is trained, the schemes differ little: {scheme} reached perplexity "
                f"{chosen['value']:.2f} at the training length")
        text += (f", the best of all {len(present)} trained schemes." if scheme == best else
                 f", within {TIE:.0%} of the best, {best} ({best_point['value']:.2f}).")
        reasons = [Reason(text, (chosen,) if scheme == best else (chosen, best_point))]
        if scheme == "rope":
            longest = max(lab.lengths(task))
            scalings = [name for name in TEST_TIME if lab.has(task, name)]
            if scalings:
                scaling = lab.best(task, scalings, longest)
                plain, scaled = lab.cite(task, "rope", longest), lab.cite(task, scaling, longest)
                reasons.append(Reason(
                    f"If the context must grow later, a RoPE model extends without new weights: in the lab, "
                    f"{scaling} at test time took the RoPE model's perplexity at {longest / train_len:g}x from "
                    f"{plain['value']:.2f} to {scaled['value']:.2f}, with no training; with a short fine-tune, "
                    f"position interpolation took LLaMA from 2,048 to 32,768 positions and YaRN Llama 2 to 128k.",
                    (plain, scaled, cite("chen2023"), cite("peng2023"))))
            reasons.append(Reason("RoPE makes attention depend on relative position through a rotation; the "
                                  "cos/sin cache is computed once (posenc serves it) and applied elementwise.",
                                  (cite("su2021"),)))
    params, spec, param_reasons = _parameters(scheme, scenario)
    reasons += param_reasons + _latency_reasons(scheme, scenario)
    notes.append(scale_note(lab, task, scheme))
    return Pick(scenario.to_dict(), scheme, _summary(scheme, params), params, tuple(reasons), tuple(notes),
                spec=spec, lab=lab.describe())


def scale_note(lab: LabFile, task: str, scheme: str) -> Reason:
    """What the lab's size is: the caveat every lab-based answer carries."""
    budget = lab.doc["configuration"]["budget"]
    model = budget.get("model", {})
    steps = lab.doc["configuration"]["tasks"][task]["plan"].get("steps")
    return Reason(f"The lab's models are tiny ({model.get('n_layers')} layers, d_model {model.get('d_model')}, "
                  f"{steps} steps on synthetic data): it shows which effects exist, not their size in a large "
                  f"model trained on text.", (lab.cite(task, scheme, lab.train_len(task)),))

