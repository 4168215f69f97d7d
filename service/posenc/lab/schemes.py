"""The positional schemes the lab compares. Plain data (no numpy, no torch), so `posenc lab --help`
lists them at once; `signals.py` turns a scheme into posenc's specs and the tensors a model takes.

The RoPE scalings are applied at test time only, the way a trained model's context is extended
without fine-tuning: they evaluate the model trained with plain RoPE (`trained_as`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Scheme:
    name: str
    trained_as: str  # the scheme whose trained model this one evaluates
    summary: str
    absolute: str | None = None  # "sinusoidal" (added to the token embeddings) | "learned" (trained rows)
    rotary: bool = False
    alibi: bool = False
    scaling: str | None = None  # the RoPE scaling (rope_type) applied at test time


SCHEMES = {scheme.name: scheme for scheme in (
    Scheme("sinusoidal", "sinusoidal", "sinusoidal table added to the token embeddings (Vaswani et al.)",
           absolute="sinusoidal"),
    Scheme("learned", "learned", "learned absolute rows; rows past the training length keep their initial values",
           absolute="learned"),
    Scheme("rope", "rope", "RoPE on queries and keys (Su et al.)", rotary=True),
    Scheme("rope_linear", "rope", "the RoPE model, linear position interpolation at test time, set for the "
           "evaluated length", rotary=True, scaling="linear"),
    Scheme("rope_ntk", "rope", "the RoPE model, static NTK-aware base at test time, set for the evaluated length",
           rotary=True, scaling="ntk"),
    Scheme("rope_dynamic", "rope", "the RoPE model, dynamic NTK at test time, set once for the longest length",
           rotary=True, scaling="dynamic"),
    Scheme("rope_yarn", "rope", "the RoPE model, YaRN at test time, set for the evaluated length", rotary=True,
           scaling="yarn"),
    Scheme("alibi", "alibi", "ALiBi bias on the attention scores (Press et al.)", alibi=True),
    Scheme("rope_alibi", "rope_alibi", "RoPE and the ALiBi bias in the same attention", rotary=True, alibi=True),
    Scheme("nope", "nope", "no positional encoding: the causal mask alone"),
)}
