"""Picking for an existing checkpoint: what taking it to a longer context needs. The model's encoding
is the one posenc reads from its config.json (`posenc.from_hf_config`). For a RoPE model: the scaling
and its parameters, the config.json keys to set (only when posenc reads the patched config back as
the same encoding), and what posenc computes for it; for the others, what the lab and the sources
say happens without a change, or why training is needed.
"""

from __future__ import annotations

import math

import numpy as np

from ..encodings import RopeSpec
from ..errors import PosencError
from ..models import from_hf_config
from .answer import Pick, Reason
from .evidence import LabFile
from .scenario import Scenario
from .sources import cite
from .train import TEST_TIME, rope_base, rope_base_reason, scale_note

#: The rope_type a scaling scheme writes into config.json; ntk is a larger rope_theta instead.
ROPE_TYPES = {"rope_linear": "linear", "rope_dynamic": "dynamic", "rope_yarn": "yarn"}
#: What each scaling is, for summaries; the source it rests on beside the lab, if any.
NAMES = {"rope_linear": ("linear position interpolation", "chen2023"), "rope_ntk": ("NTK-aware base scaling", None),
         "rope_dynamic": ("dynamic NTK", "hf_dynamic"), "rope_yarn": ("YaRN", "peng2023"),
         "rope": ("a larger RoPE base", None)}
#: The scalings a model may already have that pick extends further (a new factor over the same original).
RESCALABLE = ("default", "linear", "yarn", "dynamic")
#: config.json keys that state a model's context, by family.
CONTEXT_KEYS = ("max_position_embeddings", "max_seq_len", "n_positions", "seq_length", "max_sequence_length")


def _config_evidence(key: str, value) -> dict:
    return {"kind": "config", "key": key, "value": value, "says": "the model's own config.json, as posenc reads it"}


def _stated_context(config: dict | None) -> tuple[str, int] | None:
    for key in CONTEXT_KEYS:
        value = (config or {}).get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 1:
            return key, value
    return None


def pick_extend(scenario: Scenario, lab: LabFile) -> Pick:
    if scenario.config is None:
        spec = RopeSpec(scenario.head_dim, max_position_embeddings=scenario.original_context)
        return _extend_rope(scenario, lab, spec)
    model = from_hf_config(scenario.config)
    entries = list(model.encodings.values())
    kinds = {entry.spec.KIND for entry in entries}
    if len(entries) > 1 and (len(kinds) > 1 or kinds == {"rope"}):
        listed = ", ".join(f"{entry.layer_type} ({entry.spec.KIND})" for entry in entries)
        raise PosencError("config", f"this {model.model_type} model has several position encodings ({listed}); pick "
                          "advises one encoding and does not say how to extend each layer type")
    # several layer types of one kind that is not RoPE (T5's encoder and decoder buckets): that kind's answer
    kind = entries[0].spec.KIND if entries else "nope"
    if kind == "rope":
        return _extend_rope(scenario, lab, entries[0].spec)
    return _extend_other(scenario, lab, kind, entries[0].spec if entries else None)


def _extend_other(scenario: Scenario, lab: LabFile, kind: str, spec) -> Pick:
    """ALiBi, T5, NoPE: nothing to change; learned and sinusoidal: training at the target length."""
    target, task = scenario.target_context, "lm"
    stated = _stated_context(scenario.config)
    if kind == "learned":
        stated = ("num_positions", spec.num_positions)
    ratio = target / stated[1] if stated else lab.longest_ratio(task)
    if stated and target <= stated[1]:
        return _unchanged(scenario, lab, kind, f"the model states {stated[1]:,} positions; {target:,} fit",
                          [Reason(f"{stated[0]} is {stated[1]:,}.", (_config_evidence(*stated),))])
    length = lab.length_for(task, ratio)
    lab_scheme = {"alibi": "alibi", "nope": "nope", "learned": "learned", "sinusoidal": "sinusoidal"}.get(kind)
    point = lab.cite(task, lab_scheme, length) if lab_scheme and lab.has(task, lab_scheme) else None
    at_train = lab.cite(task, lab_scheme, lab.train_len(task)) if point else None
    measured = (f"in the lab, {lab_scheme}'s perplexity went from {at_train['value']:.2f} at the training length to "
                f"{point['value']:.2f} at {length / lab.train_len(task):g}x") if point else ""
    measured_evidence = (at_train, point) if point else ()
    model_type = _config_evidence("model_type", scenario.config.get("model_type"))
    if kind in ("alibi", "nope", "t5"):
        if kind == "alibi":
            reasons = [Reason("Press et al. trained at 1024 and matched, at 2048, a model trained at 2048.",
                              (cite("press2022"),))]
            if point:
                reasons.insert(0, Reason(f"ALiBi's bias is defined at every distance; {measured}.", measured_evidence))
        elif kind == "t5":
            reasons = [Reason(f"T5's buckets are defined at every distance: offsets past max_distance "
                              f"{spec.max_distance} share the last bucket, so longer inputs reuse trained buckets.",
                              (cite("raffel2020"),))]
        else:
            reasons = [Reason("A model without positional encoding has nothing to rescale"
                              + (f"; {measured}." if point else "."), measured_evidence or (model_type,))]
        return _unchanged(scenario, lab, kind, "its encoding has no length to change", reasons)
    if scenario.training_budget == "none":
        raise PosencError("training_budget", f"a {kind} model has no scaling to apply at test time"
                          + (f" ({measured})" if point else "") + f"; reaching {target:,} positions needs training: "
                          "give fine_tune or full")
    what = (f"grow the learned table to {target:,} rows and train the new rows at {target:,} positions"
            if kind == "learned" else f"fine-tune at {target:,} positions")
    reasons = [Reason("An absolute encoding does not carry past the length it was trained at"
                      + (f": {measured}." if point else "."), measured_evidence or (model_type,))]
    params = {"num_positions": target} if kind == "learned" else {"train_context": target}
    return Pick(scenario.to_dict(), kind, what, params, tuple(reasons), lab=lab.describe())


def _unchanged(scenario: Scenario, lab: LabFile, kind: str, why: str, reasons: list[Reason]) -> Pick:
    return Pick(scenario.to_dict(), "unchanged", f"nothing to change ({kind}): {why}", {}, tuple(reasons),
                lab=lab.describe())


def _stated_original(config: dict | None) -> int | None:
    """original_max_position_embeddings as the config states it (in rope_scaling / rope_parameters or at the top)."""
    for holder in ((config or {}).get("rope_scaling"), (config or {}).get("rope_parameters"), config):
        if isinstance(holder, dict) and isinstance(holder.get("original_max_position_embeddings"), int):
            return holder["original_max_position_embeddings"]
    return None


def _extend_rope(scenario: Scenario, lab: LabFile, spec: RopeSpec) -> Pick:
    target = scenario.target_context
    original = spec.original_max_position_embeddings or spec.max_position_embeddings
    if original is None:
        raise PosencError("config.max_position_embeddings", "the config states no context length: pick cannot say "
                          "what the model was trained at")
    if spec.rope_type == "linear":  # posenc's reader drops the key: linear scaling does not use it
        original = _stated_original(scenario.config)
        if original is None:
            raise PosencError("config.rope_scaling", f"linear scaling (factor {spec.scaling_params['factor']:g}) "
                              f"with max_position_embeddings {spec.max_position_embeddings:,}: configs state either the original context there "
                              "(Vicuna-16k: 4096 with factor 4) or the extended one (Gemma 3: 131072 with factor "
                              "8); add original_max_position_embeddings to rope_scaling to say which")
    factor = spec.scaling_params.get("factor", 1.0) if spec.rope_type in ("linear", "yarn") else 1.0
    current = max(spec.max_position_embeddings or original, int(original * factor))
    if target <= current:
        stated = [_config_evidence("max_position_embeddings", spec.max_position_embeddings or original)]
        text = f"max_position_embeddings is {stated[0]['value']:,}"
        if factor != 1.0:
            stated += [_config_evidence("original_max_position_embeddings", original),
                       _config_evidence("factor", factor)]
            text += f"; {spec.rope_type} scaling by {factor:g} over the original {original:,}"
        return _unchanged(scenario, lab, f"rope, {spec.rope_type}", f"it serves {current:,} positions",
                          [Reason(text + ".", tuple(stated))])
    if spec.rope_type not in RESCALABLE:
        raise PosencError("config.rope_scaling", f"this model already uses {spec.rope_type} scaling (context "
                          f"{current:,}); no published recipe extends a {spec.rope_type} model further, and pick "
                          "will not guess one")
    ratio = target / original
    notes = []
    if ratio > lab.longest_ratio("lm") + 1e-9:
        notes.append(Reason(f"The target is {ratio:g}x the original context; the lab measured up to "
                            f"{lab.longest_ratio('lm'):g}x.", (lab.cite("lm", "rope", max(lab.lengths("lm"))),)))
    if spec.rope_type == "dynamic" and scenario.training_budget == "none":
        point = lab.cite("lm", "rope_dynamic", lab.length_for("lm", ratio))
        return _unchanged(scenario, lab, "rope, dynamic", "dynamic NTK already stretches past the original context",
                          [Reason("Dynamic NTK recomputes the base for each longer sequence at run time; in the "
                                  f"lab: perplexity {point['value']:.2f} at {point['length'] / point['train_len']:g}x.",
                                  (cite("hf_dynamic"), point))])
    if scenario.training_budget == "none":
        if spec.rope_type in ("linear", "yarn"):
            scheme = f"rope_{spec.rope_type}"
            reasons = [Reason(f"The model was extended with {spec.rope_type} scaling; the same type with a new factor "
                              f"({ratio:g} over its original {original:,}) keeps what it was tuned for.",
                              (_config_evidence("rope_type", spec.rope_type),))]
        else:
            scheme, reasons = _test_time(scenario, lab, ratio)
        notes.append(_copy_note(lab, scheme, ratio))
    elif scenario.training_budget == "fine_tune":
        scheme, reasons = "rope_yarn", _fine_tune_reasons(scenario, lab, ratio)
    else:
        scheme = "rope"
        reasons = [Reason("Continued pre-training at the target length with a larger base is how published "
                          "long-context models were made: base 10,000 to 500,000 (Xiong et al.), to 1,000,000 "
                          "for Code Llama at 16,384.", (cite("xiong2023"), cite("roziere2023")))]
    if scenario.training_budget != "full":  # the answer rests on lab rows: say what size they are
        notes.append(scale_note(lab, "lm", scheme if lab.has("lm", scheme) else "rope"))
    new_spec, parameters = _scaled(scheme, spec, ratio, original, target)
    if scheme == "rope":
        reasons.append(rope_base_reason(target, new_spec.base))
    patch, patch_notes = _config_patch(scenario, new_spec, scheme, parameters, target)
    name = NAMES[scheme][0]
    summary = (f"RoPE with {name}, factor {ratio:g} over the original {original:,}" if scheme != "rope"
               else f"RoPE with base {new_spec.base:g}, continued pre-training at {target:,}")
    return Pick(scenario.to_dict(), scheme, summary, parameters, tuple(reasons), tuple(notes + patch_notes),
                spec=new_spec.to_dict(), config_patch=patch, computed=_computed(new_spec, target),
                lab=lab.describe())


def _test_time(scenario: Scenario, lab: LabFile, ratio: float) -> tuple[str, list[Reason]]:
    """The lab's best test-time scaling at the target's ratio (dynamic NTK left out when latency is tight)."""
    task, train_len = "lm", lab.train_len("lm")
    length = lab.length_for(task, ratio)
    candidates = [name for name in TEST_TIME if not (scenario.latency == "tight" and name == "rope_dynamic")]
    best = lab.best(task, candidates, length)
    chosen, plain = lab.cite(task, best, length), lab.cite(task, "rope", length)
    others = [lab.cite(task, name, length) for name in candidates if name != best and lab.has(task, name)]
    shown = ", ".join(f"{e['scheme']} {e['value']:.2f}" for e in others)
    reasons = [Reason(f"Without training, {best} gave the lowest perplexity of the test-time scalings at "
                      f"{length / train_len:g}x the training length: {chosen['value']:.2f}, against "
                      f"{plain['value']:.2f} for the unscaled RoPE model" + (f" ({shown})." if shown else "."),
                      (chosen, plain, *others))]
    source = NAMES[best][1]
    if source:
        reasons.append(Reason({"peng2023": "YaRN's own results are after a short fine-tune; it also extrapolates "
                                           "past the length it was tuned at.",
                               "chen2023": "Position interpolation was published with a short fine-tune (within "
                                           "1000 steps); without one, expect the lab's numbers.",
                               "hf_dynamic": "Dynamic NTK recomputes the frequencies as sequences grow, so short "
                                             "inputs are served as trained."}[source], (cite(source),)))
    if scenario.latency == "tight":
        reasons.append(Reason("latency: dynamic NTK is left out: it recomputes the cos/sin cache whenever a longer "
                              "sequence arrives, and keys already cached keep their old rotation.",
                              (cite("hf_dynamic"),)))
    if chosen["value"] is not None and plain["value"] is not None and chosen["value"] >= plain["value"]:
        reasons.append(Reason(f"No test-time scaling beat the unscaled model at this ratio ({chosen['value']:.2f} "
                              f"against {plain['value']:.2f}): consider fine_tune.", (chosen, plain)))
    return best, reasons


def _fine_tune_reasons(scenario: Scenario, lab: LabFile, ratio: float) -> list[Reason]:
    length = lab.length_for("lm", ratio)
    reasons = [Reason("YaRN extends RoPE models with 10x fewer tokens and 2.5x fewer steps than earlier methods"
                      + (", and extrapolates past the length it is tuned at" if scenario.extrapolate else "") + ".",
                      (cite("peng2023"),)),
               Reason("Position interpolation (linear) also works with a short fine-tune (within 1000 steps); YaRN "
                      "needs less.", (cite("chen2023"),))]
    if lab.has("lm", "rope_yarn"):
        yarn, plain = lab.cite("lm", "rope_yarn", length), lab.cite("lm", "rope", length)
        reasons.append(Reason(f"Even with no fine-tune, YaRN at {length / yarn['train_len']:g}x in the lab: perplexity "
                              f"{yarn['value']:.2f} against {plain['value']:.2f} unscaled.", (yarn, plain)))
    return reasons


def _copy_note(lab: LabFile, scheme: str, ratio: float) -> Reason:
    if not lab.has("copy", scheme):
        return Reason("The lab file holds no copy task for this scaling: exact retrieval past the original "
                      "context is unmeasured here.", (lab.cite("lm", scheme, lab.train_len("lm")),))
    length = lab.length_for("copy", ratio)
    point = lab.cite("copy", scheme, length)
    text = (f"Exact positions are another matter: on the copy task {scheme} scored {point['value']:.3f} token "
            f"accuracy at {point['length'] / point['train_len']:g}x (chance {lab.chance('copy'):.3f})")
    best = lab.best("copy", [name for name in TEST_TIME if lab.has("copy", name)], length)
    if best == scheme:
        return Reason(text + ".", (point,))
    other = lab.cite("copy", best, length)
    return Reason(text + f"; {best} kept {other['value']:.3f}, the best test-time scaling there: a task that must "
                  "retrieve exact positions may rank them otherwise.", (point, other))


def _scaled(scheme: str, spec: RopeSpec, ratio: float, original: int, target: int) -> tuple[RopeSpec, dict]:
    """posenc's spec of the extended model and the parameters that define it."""
    keep = {"partial_rotary_factor": spec.partial_rotary_factor, "layout": spec.layout}
    if scheme in ("rope_ntk", "rope"):  # no scaling: a larger base (NTK's for the ratio, or the bound's)
        base = (spec.base * ratio ** (spec.rotary_dim / (spec.rotary_dim - 2)) if scheme == "rope_ntk"
                else max(spec.base, rope_base(target)))
        return (RopeSpec(spec.head_dim, base=base, max_position_embeddings=target, **keep),
                {"base": base, "max_position_embeddings": target})
    rope_type = ROPE_TYPES[scheme]
    scaling = {"rope_type": rope_type, "factor": ratio}
    if rope_type == spec.rope_type:  # the model's own parameters of that type (YaRN's betas) stay
        scaling = {**_own_params(spec), **scaling}
    if rope_type == "dynamic":
        new = RopeSpec(spec.head_dim, base=spec.base, scaling=scaling, max_position_embeddings=original, **keep)
        return new, {"rope_type": "dynamic", "factor": ratio, "max_position_embeddings": original}
    new = RopeSpec(spec.head_dim, base=spec.base, scaling=scaling, max_position_embeddings=target,
                   original_max_position_embeddings=original, **keep)
    return new, {**scaling, "original_max_position_embeddings": original, "max_position_embeddings": target}


def _own_params(spec: RopeSpec) -> dict:
    """The model's own parameters of its scaling type besides the factor (YaRN's betas), defaults filled."""
    return {key: value for key, value in spec.scaling_params.items() if key not in ("rope_type", "factor")}


def _config_patch(scenario: Scenario, new: RopeSpec, scheme: str, parameters: dict,
                  target: int) -> tuple[dict | None, list[Reason]]:
    """The config.json keys that give the model `new`: offered only when posenc reads the patched config
    back as that encoding (a family whose config names these keys otherwise gets none, and a note)."""
    if scenario.config is None:
        return None, []
    scaling = None if scheme in ("rope", "rope_ntk") else \
        {key: value for key, value in parameters.items() if key != "max_position_embeddings"}
    context = parameters["max_position_embeddings"]
    if "rope_parameters" in scenario.config:
        patch = {"rope_parameters": {**(scaling or {"rope_type": "default"}), "rope_theta": new.base},
                 "max_position_embeddings": context}
    else:
        patch = {"rope_scaling": scaling, "rope_theta": new.base, "max_position_embeddings": context}
    try:
        same = _same_encoding(from_hf_config({**scenario.config, **patch}).get().spec, new, target)
    except PosencError:
        same = False
    if same:
        return patch, []
    return None, [Reason(f"posenc could not express this in the {scenario.config.get('model_type')} config's keys "
                         "(the patched config did not read back as the spec above): set the spec's values by hand.",
                         (_config_evidence("model_type", scenario.config.get("model_type")),))]


def _same_encoding(a: RopeSpec, b: RopeSpec, length: int) -> bool:
    fa, sa = a.inv_freq(float(length))
    fb, sb = b.inv_freq(float(length))
    return fa.shape == fb.shape and bool(np.array_equal(fa, fb)) and sa == sb


def _computed(spec: RopeSpec, target: int) -> dict:
    inv_freq, attention_factor = spec.inv_freq(float(target))
    wavelength = 2 * math.pi / float(inv_freq[-1])
    return {"attention_factor": float(attention_factor), "inv_freq_highest": float(inv_freq[0]),
            "inv_freq_lowest": float(inv_freq[-1]), "longest_wavelength": wavelength,
            "turns_of_the_slowest_pair_over_the_target": target / wavelength}
