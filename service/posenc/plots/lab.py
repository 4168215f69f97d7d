"""A lab results file (posenc.lab.results) drawn: per task, the headline metric against the
evaluated length (perplexity of the Markov source with the source's own as the floor; copy
accuracy), and the attention entropy against length next to that of uniform attention over the
causal prefix. The training length is marked on every panel: left of it is what the model saw."""

from __future__ import annotations

from ..errors import PosencError
from .model import Figure, Panel, Rule, Series

#: Per task: (metric key, axis label, log y axis). The chance level comes from posenc.lab.metrics.HEADLINE.
METRICS = {"lm": ("perplexity", "perplexity", True), "copy": ("accuracy", "token accuracy", False)}


def _task_panels(task: str, configuration: dict, evaluations: list[tuple[str, list[dict]]]) -> list[Panel]:
    from ..lab.metrics import HEADLINE

    key, label, log = METRICS[task]
    _, _, chance = HEADLINE[task]
    train_len = configuration["geometry"]["train_len"]
    lengths = [p["length"] for p in evaluations[0][1]]
    metric = [Series(scheme, lengths, [p[key] if p[key] is not None else float("nan") for p in points])
              for scheme, points in evaluations]
    entropy = [Series(scheme, lengths, [p["attention_entropy"] for p in points]) for scheme, points in evaluations]
    entropy.append(Series("uniform attention", lengths, [p["uniform_attention_entropy"] for p in evaluations[0][1]],
                          emphasis=True))
    if task == "lm":
        metric.append(Series("source (floor)", lengths, [p["source_perplexity"] for p in evaluations[0][1]],
                             emphasis=True))
    trained = Rule("x", train_len, f"training length {train_len}", dashed=True)
    return [Panel(f"{task}: {label} vs length", "evaluated length", label, x_log=True, y_log=log, series=metric,
                  rules=[trained, Rule("y", chance(configuration["task"]["vocab"]), "chance")]),
            Panel(f"{task}: attention entropy vs length", "evaluated length", "mean attention entropy (nats)",
                  x_log=True, series=entropy, rules=[trained])]


def build(doc: dict) -> Figure:
    from ..lab.results import checked, rows

    checked(doc)
    try:
        tasks = doc["configuration"]["tasks"]
        by_task: dict[str, list] = {}
        for task, scheme, points in rows(doc):
            by_task.setdefault(task, []).append((scheme, points))
        panels = [panel for task in tasks if task in by_task
                  for panel in _task_panels(task, tasks[task], by_task[task])]
    except (KeyError, TypeError, IndexError, ValueError, AttributeError):
        raise PosencError("results", "is not a complete posenc lab results file") from None
    if not panels:
        raise PosencError("results", "holds no evaluations to draw")
    seed, budget = doc["configuration"]["seed"], doc["configuration"]["budget"]["name"]
    return Figure(panels, {"budget": budget, "seed": seed, "tasks": list(by_task),
                           "text": f"posenc lab, budget {budget}, seed {seed}: {', '.join(by_task)}"})
