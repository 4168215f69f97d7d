"""What an evaluation at one length reports, from the per-token losses and hits of the model and
its attention entropies (numpy, float64 sums: the same numbers for the same tensors).

Every point: `loss` (mean cross-entropy over the scored targets, nats), the attention entropy per
layer (mean over sequences, heads and queries) and its mean, and `uniform_attention_entropy`:
the entropy attention spread evenly over each query's causal prefix would have, averaged over
the queries (ln of the prefix length), the ceiling the measured entropy is read against.
The language-model task adds perplexity, over the whole sequence and over the positions past
the training length, each next to the source's own (the floor); the copy task, token accuracy.
"""

from __future__ import annotations

import math

import numpy as np

from .tasks import Batch


def _perplexity(nll: np.ndarray) -> float | None:
    return math.exp(float(nll.mean())) if nll.size else None


def point(task_name: str, batch: Batch, nll: np.ndarray, correct: np.ndarray, entropy_by_layer: list[float],
          train_len: int) -> dict:
    """The evaluation point at this batch's length (`nll`, `correct`: [n, length] per target)."""
    length = batch.inputs.shape[1]
    scored = batch.scored
    out = {"length": length, "loss": float(nll[scored].mean()),
           "attention_entropy": float(np.mean(entropy_by_layer)),
           "attention_entropy_by_layer": [float(e) for e in entropy_by_layer],
           "uniform_attention_entropy": float(np.log(np.arange(1, length + 1)).mean())}
    if task_name == "lm":
        beyond = scored & (np.arange(length) >= train_len)[None]
        out |= {"perplexity": _perplexity(nll[scored]), "perplexity_beyond_train": _perplexity(nll[beyond]),
                "source_perplexity": _perplexity(batch.source_nll[scored]),
                "source_perplexity_beyond_train": _perplexity(batch.source_nll[beyond])}
    else:
        out["accuracy"] = float(correct[scored].mean())
    return out


#: Each task's headline metric, whether higher is better, and its chance level for a vocabulary.
HEADLINE = {"lm": ("perplexity", False, lambda vocab: float(vocab)),
            "copy": ("accuracy", True, lambda vocab: 1.0 / vocab)}
