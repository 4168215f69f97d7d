"""The lab's synthetic tasks: data the run generates from a seed (numpy's PCG64, the same numbers on
every platform), nothing downloaded. Both hand out `Batch`es of any length, so one task trains at
one length and is evaluated at longer ones from the same distribution.

* `MarkovSource` (the language-model task): a k-th order Markov chain over a small vocabulary, each
  next-token distribution drawn once from a Dirichlet. Its true conditional probabilities are known,
  so every batch carries the source's own loss: the floor no model can beat, at every length.
* `CopyTask`: n random tokens, a separator, the same n tokens again; only the copy is scored. Each
  copied token sits exactly n + 1 positions after its original, so the model must find it by
  position (or by content, where tokens repeat ambiguously): the task of the literature's
  copy-length experiments.

torch-free on purpose: the data, and the floor, are checked without a model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..args import as_float, as_int
from ..errors import PosencError


@dataclass(frozen=True)
class Batch:
    """`inputs` and `targets` int64 [n, length] (targets are inputs shifted by one), `scored` bool
    [n, length]: the targets the loss and the metrics count. `source_nll` float64 [n, length]: the
    source's own -log p of each target (None where the task has no probabilistic floor)."""

    inputs: np.ndarray
    targets: np.ndarray
    scored: np.ndarray
    source_nll: np.ndarray | None = None


class MarkovSource:
    """Order-`order` Markov chain over `vocab` tokens; transition rows ~ Dirichlet(`concentration`)
    (small concentrations make peaked rows: a learnable source with a low entropy rate). The first
    `order` tokens of a sequence are uniform."""

    name = "lm"
    metric = "perplexity"

    def __init__(self, *, vocab: int, order: int, concentration: float, seed: int):
        self.vocab = as_int(vocab, "tasks.lm.vocab", minimum=2, maximum=256)
        self.order = as_int(order, "tasks.lm.order", minimum=1, maximum=3)
        self.concentration = as_float(concentration, "tasks.lm.concentration", exclusive_minimum=0.0)
        rng = np.random.Generator(np.random.PCG64(seed))
        self.transitions = rng.dirichlet(np.full(self.vocab, self.concentration), size=self.vocab ** self.order)
        self._cumulative = np.cumsum(self.transitions, axis=1)
        self._cumulative[:, -1] = 1.0  # a draw of u < 1 always lands inside the row

    @property
    def vocab_size(self) -> int:
        return self.vocab

    def entropy_rate(self, length: int = 1 << 16, seed: int = 0) -> float:
        """The source's entropy rate in nats per token, estimated on one long sequence (the
        perplexity floor far from a sequence's start is its exp)."""
        batch = self.batch(np.random.Generator(np.random.PCG64(seed)), 1, length)
        return float(batch.source_nll[0, self.order:].mean())

    def batch(self, rng: np.random.Generator, n: int, length: int) -> Batch:
        tokens = np.empty((n, length + 1), dtype=np.int64)
        tokens[:, :self.order] = rng.integers(0, self.vocab, size=(n, self.order))
        nll = np.empty((n, length + 1), dtype=np.float64)
        nll[:, :self.order] = np.log(self.vocab)
        draws = rng.random((n, length + 1))
        for t in range(self.order, length + 1):
            context = np.zeros(n, dtype=np.int64)
            for back in range(self.order, 0, -1):
                context = context * self.vocab + tokens[:, t - back]
            tokens[:, t] = (self._cumulative[context] < draws[:, t, None]).sum(axis=1)
            nll[:, t] = -np.log(self.transitions[context, tokens[:, t]])
        return Batch(tokens[:, :-1], tokens[:, 1:], np.ones((n, length), dtype=bool), nll[:, 1:])

    def describe(self) -> dict:
        return {"kind": "markov", "vocab": self.vocab, "order": self.order, "concentration": self.concentration,
                "entropy_rate_nats": self.entropy_rate()}


class CopyTask:
    """x_1..x_n, SEP, x_1..x_n with x uniform over `vocab` tokens (SEP is token `vocab`): the input
    is the first 2n tokens, so a sequence of length L copies n = L/2 tokens, every one scored."""

    name = "copy"
    metric = "accuracy"

    def __init__(self, *, vocab: int):
        self.vocab = as_int(vocab, "tasks.copy.vocab", minimum=2, maximum=256)

    @property
    def vocab_size(self) -> int:
        return self.vocab + 1

    @property
    def separator(self) -> int:
        return self.vocab

    def batch(self, rng: np.random.Generator, n: int, length: int) -> Batch:
        if length % 2:
            raise PosencError("length", f"a copy sequence has an even length (n tokens and their copy), got {length}")
        half = length // 2
        content = rng.integers(0, self.vocab, size=(n, half))
        sequence = np.concatenate([content, np.full((n, 1), self.separator), content], axis=1)
        scored = np.zeros((n, length), dtype=bool)
        scored[:, half:] = True
        return Batch(sequence[:, :-1], sequence[:, 1:], scored)

    def describe(self) -> dict:
        return {"kind": "copy", "vocab": self.vocab, "separator": self.separator}


TASKS = {"lm": MarkovSource, "copy": CopyTask}


def make_task(name: str, params: dict, seed: int):
    """The task `name` with its budget's parameters; `seed` draws the Markov source's transitions
    (the copy task draws nothing once)."""
    return MarkovSource(**params, seed=seed) if name == "lm" else CopyTask(**params)
