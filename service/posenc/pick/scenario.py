"""What `posenc pick` is asked: the job, checked at the boundary (a PosencError naming the field),
with each default resolved and echoed back in the answer, so the answer says what it answered."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..args import as_bool, as_choice, as_dim, as_int, as_mapping
from ..errors import PosencError

#: train: a new model; extend: an existing checkpoint taken to a longer context.
GOALS = ("train", "extend")
#: none: no training at all (test time only); fine_tune: a short run (hundreds to a few thousand steps);
#: full: pre-training, or long continued pre-training.
TRAINING_BUDGETS = ("none", "fine_tune", "full")
#: tight: per-token latency matters (decoding with a KV cache); normal: it does not decide.
LATENCIES = ("normal", "tight")
#: The longest context pick reasons about (RoPE's float64 scaling math is exact far beyond it).
MAX_CONTEXT = 2**30


@dataclass(frozen=True)
class Scenario:
    target_context: int
    goal: str
    extrapolate: bool
    train_context: int | None
    training_budget: str
    latency: str
    n_heads: int | None
    head_dim: int
    original_context: int | None
    config: dict | None

    def to_dict(self) -> dict:
        out = asdict(self)
        out["config"] = None if self.config is None else {"model_type": self.config.get("model_type")}
        return out | {"question": self.describe()}

    @classmethod
    def of(cls, target_context, *, goal=None, extrapolate=False, train_context=None, training_budget=None,
           latency="normal", n_heads=None, head_dim=None, original_context=None, config=None) -> Scenario:
        target = as_int(target_context, "target_context", minimum=2, maximum=MAX_CONTEXT)
        if config is not None:
            from ..models import config_dict

            config = as_mapping(config_dict(config), "config")
        if goal is None:
            goal = "extend" if config is not None or original_context is not None else "train"
        goal = as_choice(goal, "goal", GOALS)
        extrapolate = as_bool(extrapolate, "extrapolate")
        if train_context is not None:
            train_context = as_int(train_context, "train_context", minimum=2, maximum=target)
            if goal == "extend":
                raise PosencError("train_context", "is the length a new model trains at (goal train); an existing "
                                  "model's context comes from its config or original_context")
            extrapolate = extrapolate or train_context < target
        if training_budget is None:
            training_budget = "full" if goal == "train" else "none"
        training_budget = as_choice(training_budget, "training_budget", TRAINING_BUDGETS)
        latency = as_choice(latency, "latency", LATENCIES)
        if goal == "train":
            if training_budget == "none":
                raise PosencError("training_budget", "a new model needs training: 'none' fits extending a checkpoint "
                                  "(goal extend); choose fine_tune (a short run) or full")
            if config is not None or original_context is not None:
                field = "config" if config is not None else "original_context"
                raise PosencError(field, "describes an existing model: to extend it, ask with goal extend")
        elif config is None and original_context is None:
            raise PosencError("config", "extending a checkpoint needs its config.json (or original_context, the "
                              "context a RoPE model was trained at)")
        if config is not None and original_context is not None:
            raise PosencError("original_context", "give a config.json or original_context, not both (the config "
                              "states the context)")
        if original_context is not None:
            original_context = as_int(original_context, "original_context", minimum=2, maximum=MAX_CONTEXT)
        if n_heads is not None:
            n_heads = as_int(n_heads, "n_heads", minimum=1, maximum=4096)
        head_dim = 128 if head_dim is None else as_dim(head_dim, "head_dim")
        if head_dim % 2:
            raise PosencError("head_dim", f"must be even (RoPE rotates pairs), got {head_dim}")
        return cls(target, goal, extrapolate, train_context, training_budget, latency, n_heads, head_dim,
                   original_context, config)

    def describe(self) -> str:
        what = (f"train a new model for {self.target_context:,} positions" if self.goal == "train"
                else f"extend a model to {self.target_context:,} positions")
        if self.train_context is not None:
            what += f" (trained at {self.train_context:,})"
        elif self.goal == "train" and self.extrapolate:
            what += " (it must work past its training length)"
        return f"{what}; training budget {self.training_budget}; latency {self.latency}"
