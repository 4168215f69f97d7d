"""What `posenc pick` answers: one recommendation with its parameters, the reasons (each with at least
one piece of evidence: a lab row or a primary source), notes on what the evidence does not cover,
and what posenc computes for the recommended encoding."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from .evidence import describe_point


@dataclass(frozen=True)
class Reason:
    text: str
    evidence: tuple[dict, ...]

    def __post_init__(self):
        if not self.evidence:
            raise ValueError(f"a reason without evidence: {self.text!r}")

    def to_dict(self) -> dict:
        return {"text": self.text, "evidence": list(self.evidence)}


@dataclass(frozen=True)
class Pick:
    scenario: dict
    scheme: str  # a lab scheme name: rope, rope_yarn, alibi, ...; "unchanged" when nothing is needed
    summary: str
    parameters: dict
    reasons: tuple[Reason, ...]
    notes: tuple[Reason, ...] = ()
    spec: dict | None = None  # posenc's spec of the recommended encoding, as the spec routes take it
    config_patch: dict | None = None  # the keys to set in the model's config.json
    computed: dict = field(default_factory=dict)  # numbers posenc computed for the recommendation
    lab: dict = field(default_factory=dict)  # which results file the lab evidence comes from

    def to_dict(self) -> dict:
        return {"scenario": self.scenario,
                "recommendation": {"scheme": self.scheme, "summary": self.summary, "parameters": self.parameters,
                                   "spec": self.spec, "config_patch": self.config_patch},
                "reasons": [reason.to_dict() for reason in self.reasons],
                "notes": [note.to_dict() for note in self.notes],
                "computed": self.computed, "lab": self.lab}

    def to_text(self) -> str:
        lines = [f"posenc pick: {self.scenario['question']}", f"recommend: {self.summary}"]
        if self.config_patch:
            lines.append(f"  config.json: {json.dumps(self.config_patch)}")
        if self.parameters:
            lines.append("  parameters: " + ", ".join(f"{k} {_shown(v)}" for k, v in self.parameters.items()))
        lines.append("why:")
        lines += _reasons(self.reasons)
        if self.notes:
            lines.append("what the evidence does not cover:")
            lines += _reasons(self.notes)
        if self.computed:
            lines.append("what posenc computes for it:")
            lines += [f"  {k}: {_shown(v)}" for k, v in self.computed.items()]
        if self.lab:
            lines.append(f"lab evidence from {self.lab['file']} (budget {self.lab['budget']}, {self.lab['cpu']})")
        return "\n".join(lines)


def _shown(value) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list) and len(value) > 8:
        return "[" + ", ".join(_shown(v) for v in value[:4]) + f", ... {len(value)} values]"
    if isinstance(value, list):
        return "[" + ", ".join(_shown(v) for v in value) + "]"
    return str(value)


def _reasons(reasons) -> list[str]:
    lines = []
    for number, reason in enumerate(reasons, 1):
        lines.append(f"  {number}. {reason.text}")
        for evidence in reason.evidence:
            if evidence["kind"] == "lab":
                lines.append(f"     [lab] {evidence['file']} {evidence['path']}: {describe_point(evidence)}")
            elif evidence["kind"] == "config":
                lines.append(f"     [config] {evidence['key']} = {evidence['value']} ({evidence['says']})")
            else:
                lines.append(f"     [{evidence['id']}] {evidence['where']}, \"{evidence['title']}\" {evidence['url']}")
    return lines
