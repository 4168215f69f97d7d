"""`posenc pick`: which positional encoding, with which parameters, for a job, and why: each reason
points at a row of the lab's measurements (a `posenc lab` results file: the documented-size run shipped
with posenc unless another is given) or at a primary source (`sources.SOURCES`), never at folklore.

    >>> import posenc.pick
    >>> answer = posenc.pick.pick(32768, config=llama2_config)   # extend a 4k model to 32k
    >>> answer.scheme, answer.config_patch, answer.reasons[0].evidence

`train.py` answers for a new model, `extend.py` for an existing checkpoint (its config.json read by
posenc), `evidence.py` reads and cites the lab file, `scenario.py` checks the question.
"""

from __future__ import annotations

from pathlib import Path

from .answer import Pick, Reason
from .evidence import LabFile
from .scenario import GOALS, LATENCIES, TRAINING_BUDGETS, Scenario


def pick(target_context, *, goal=None, extrapolate=False, train_context=None, training_budget=None,
         latency="normal", n_heads=None, head_dim=None, original_context=None, config=None,
         results: str | Path | dict | None = None) -> Pick:
    """The recommendation for a job (see Scenario.of for the fields; defaults: goal "extend" with a config
    or original_context, else "train"; training_budget "full" to train, "none" to extend). `results`: a
    lab results file (path or document) to reason from instead of the shipped documented run."""
    scenario = Scenario.of(target_context, goal=goal, extrapolate=extrapolate, train_context=train_context,
                           training_budget=training_budget, latency=latency, n_heads=n_heads, head_dim=head_dim,
                           original_context=original_context, config=config)
    if results is None:
        lab = LabFile.documented()
    elif isinstance(results, dict):
        lab = LabFile.of(results, "the posted results")
    else:
        lab = LabFile.read(results)
    if scenario.goal == "train":
        from .train import pick_train

        return pick_train(scenario, lab)
    from .extend import pick_extend

    return pick_extend(scenario, lab)


__all__ = ["GOALS", "LATENCIES", "TRAINING_BUDGETS", "Pick", "Reason", "Scenario", "pick"]
