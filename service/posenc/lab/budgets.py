"""The lab's sizes: how big the models are, how long they train, at which lengths they are
evaluated. Plain data (no numpy, no torch), so `posenc lab --help` lists the budgets at once.

* smoke: every scheme and both tasks in about a minute on two cores (CI): the runs are real but
  short, so only robust effects show (training works, the training length beats chance).
* documented: the size the docs report, tens of minutes on two cores; large enough for the
  extrapolation effects the literature argues about to show.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class ModelSize:
    d_model: int
    n_heads: int
    n_layers: int
    d_ff: int


@dataclass(frozen=True)
class TaskPlan:
    """One task's parameters (`params`, the task's own) and schedule: train `steps` batches of
    `batch` sequences at `train_len`, then evaluate `eval_sequences` sequences at each of
    `eval_lengths` (the first is the training length)."""

    params: dict
    train_len: int
    steps: int
    batch: int
    learning_rate: float
    eval_lengths: tuple[int, ...]
    eval_sequences: int


@dataclass(frozen=True)
class Budget:
    name: str
    model: ModelSize
    tasks: dict = field(default_factory=dict)  # task name -> TaskPlan
    rope_base: float = 10000.0
    #: torch's intra-op threads, fixed: a reduction split over another thread count may round differently,
    #: and these models are too small to gain from a second thread (on a loaded machine two spin and wait).
    threads: int = 1
    warmup_fraction: float = 0.05

    def to_dict(self) -> dict:
        return asdict(self)


BUDGETS = {budget.name: budget for budget in (
    Budget("smoke", ModelSize(d_model=32, n_heads=2, n_layers=2, d_ff=64), {
        "lm": TaskPlan({"vocab": 8, "order": 2, "concentration": 0.2}, train_len=32, steps=150, batch=16,
                       learning_rate=3e-3, eval_lengths=(32, 64, 128, 256), eval_sequences=16),
        "copy": TaskPlan({"vocab": 16}, train_len=32, steps=150, batch=16, learning_rate=3e-3,
                         eval_lengths=(32, 64, 128, 256), eval_sequences=16),
    }),
    Budget("documented", ModelSize(d_model=64, n_heads=4, n_layers=2, d_ff=256), {
        "lm": TaskPlan({"vocab": 16, "order": 2, "concentration": 0.2}, train_len=64, steps=2000, batch=32,
                       learning_rate=2e-3, eval_lengths=(64, 96, 128, 192, 256, 384, 512), eval_sequences=64),
        "copy": TaskPlan({"vocab": 32}, train_len=64, steps=2000, batch=32, learning_rate=2e-3,
                         eval_lengths=(64, 96, 128, 192, 256, 384, 512), eval_sequences=64),
    }),
)}
