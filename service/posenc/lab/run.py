"""Train at one length, evaluate at longer ones: the lab's runs, deterministic.

Per task, one model is trained per `trained_as` group (the RoPE scalings share the RoPE model) and
evaluated with each of the group's schemes at every evaluation length. Every seed is derived from
the run's seed and names (task, purpose), never from the order of the runs, so a subset of
schemes reproduces the full run's numbers for those schemes exactly:

* the task's own draws (the Markov source): (seed, task, "source");
* the training batches: (seed, task, "train"), the same batches for every scheme of the task;
* the initial weights: (seed, task, "init"), the same for every scheme (a learned table's rows
  are drawn after the token embedding, so the blocks after it start elsewhere);
* the evaluation sequences: (seed, task, "eval", length), the same for every scheme.

Threads are fixed (the budget's), deterministic algorithms on, and the caller's torch state
(threads, determinism flags, RNG) is restored afterwards.
"""

from __future__ import annotations

import contextlib
import math
import time
import zlib

import numpy as np
import torch
from torch.nn import functional as F

from ..args import as_int
from ..errors import PosencError
from . import results
from .budgets import BUDGETS, Budget, TaskPlan
from .metrics import point
from .models import TinyDecoder
from .progress import Progress
from .schemes import SCHEMES, Scheme
from .signals import Geometry, describe, signals
from .tasks import Batch, make_task

#: Points of the training-loss curve kept in the results (means over equal windows of steps).
CURVE_POINTS = 10
#: Sequences per forward pass at evaluation (bounds the [batch, heads, length, length] attention).
EVAL_CHUNK = 8
#: Gradients are clipped to this global norm.
CLIP_NORM = 1.0


def derive_seed(seed: int, *names) -> int:
    """A 32-bit seed for one purpose: CRC-32 of the seed and the names (stable across runs and
    platforms, unlike Python's salted hash)."""
    return zlib.crc32("/".join(map(str, (seed, *names))).encode())


@contextlib.contextmanager
def deterministic(threads: int):
    """torch with fixed threads, deterministic algorithms and a private RNG; the caller's settings back after."""
    saved = (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled(),
             torch.is_deterministic_algorithms_warn_only_enabled())
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    try:
        with torch.random.fork_rng(devices=[]):
            yield
    finally:
        torch.set_num_threads(saved[0])
        torch.use_deterministic_algorithms(saved[1], warn_only=saved[2])


def groups(scheme_names: list[str]) -> dict[str, list[Scheme]]:
    """{trained_as: [schemes evaluating that model]} in the order of SCHEMES."""
    out: dict[str, list[Scheme]] = {}
    for name in SCHEMES:
        if name in scheme_names:
            out.setdefault(SCHEMES[name].trained_as, []).append(SCHEMES[name])
    return out


def _tensors(batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return torch.from_numpy(batch.inputs), torch.from_numpy(batch.targets), torch.from_numpy(batch.scored)


def _schedule(plan: TaskPlan, warmup_fraction: float):
    """Learning-rate multiplier per step: linear warm-up, then a cosine down to a tenth."""
    warmup = max(1, int(plan.steps * warmup_fraction))

    def multiplier(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, plan.steps - warmup)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))

    return multiplier


def work_units(budget: Budget, task_names: list[str], scheme_names: list[str]) -> float:
    """The whole run in tokens processed, a training token counting thrice (forward and backward)."""
    total = 0.0
    for task_name in task_names:
        plan = budget.tasks[task_name]
        total += 3 * plan.steps * plan.batch * plan.train_len * len(groups(scheme_names))
        total += len(scheme_names) * plan.eval_sequences * sum(plan.eval_lengths)
    return total


def train(model: TinyDecoder, task, plan: TaskPlan, scheme: Scheme, geometry: Geometry, budget: Budget,
          seed: int, progress: Progress | None, stage: str) -> dict:
    """Train `model` in place; the loss curve (CURVE_POINTS window means) and the first and last window."""
    rng = np.random.Generator(np.random.PCG64(seed))
    signal = signals(scheme, geometry, plan.train_len, "train")
    optimizer = torch.optim.Adam(model.parameters(), lr=plan.learning_rate, betas=(0.9, 0.98))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _schedule(plan, budget.warmup_fraction))
    model.train()
    losses = []
    for step in range(plan.steps):
        inputs, targets, scored = _tensors(task.batch(rng, plan.batch, plan.train_len))
        logits, _ = model(inputs, signal)
        loss = F.cross_entropy(logits[scored], targets[scored])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP_NORM)
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
        if progress:
            progress.update(stage, 3 * plan.batch * plan.train_len,
                            f"step {step + 1}/{plan.steps} loss {losses[-1]:.3f}")
    window = max(1, len(losses) // CURVE_POINTS)
    curve = [[start + window, float(np.mean(losses[start:start + window]))]
             for start in range(0, len(losses) - window + 1, window)]
    return {"steps": plan.steps, "loss_curve": curve, "loss_first": curve[0][1], "loss_last": curve[-1][1]}


@torch.no_grad()
def evaluate(model: TinyDecoder, task_name: str, batches: dict[int, Batch], scheme: Scheme, geometry: Geometry,
             progress: Progress | None, stage: str) -> list[dict]:
    """One point per evaluation length (posenc.lab.metrics.point)."""
    model.eval()
    points = []
    for length, batch in batches.items():
        signal = signals(scheme, geometry, length, "eval")
        inputs, targets, _ = _tensors(batch)
        nll, correct, entropy_sums = [], [], None
        for first in range(0, inputs.shape[0], EVAL_CHUNK):
            logits, entropies = model(inputs[first:first + EVAL_CHUNK], signal)
            chunk_targets = targets[first:first + EVAL_CHUNK]
            nll.append(F.cross_entropy(logits.transpose(1, 2), chunk_targets, reduction="none").double().numpy())
            correct.append((logits.argmax(dim=-1) == chunk_targets).numpy())
            sums = np.array([e.double().sum().item() for e in entropies])
            entropy_sums = sums if entropy_sums is None else entropy_sums + sums
        per_layer = entropy_sums / (inputs.shape[0] * geometry.n_heads * length)
        points.append(point(task_name, batch, np.concatenate(nll), np.concatenate(correct), per_layer.tolist(),
                            geometry.train_len))
        if progress:
            progress.update(stage, batch.inputs.size, f"length {length}")
    return points


def _setting(budget: Budget, task_name: str, seed: int):
    """(plan, task, geometry) of one task: all derived from the budget, the task's name and the seed."""
    plan = budget.tasks[task_name]
    task = make_task(task_name, plan.params, derive_seed(seed, task_name, "source"))
    size = budget.model
    return plan, task, Geometry(size.d_model, size.n_heads, plan.train_len, max(plan.eval_lengths), budget.rope_base)


def run_group(budget: Budget, task_name: str, trained_as: str, scheme_names: list[str], seed: int,
              progress) -> tuple[dict, float]:
    """(the run, its seconds) of one trained model: `trained_as` trained on `task_name`, then evaluated with
    each of its group's schemes among `scheme_names`. Depends on nothing but its arguments (every seed is
    derived from names), so groups may run in any order or process. `progress`: anything with
    Progress.update's signature, or None."""
    plan, task, geometry = _setting(budget, task_name, seed)
    batches = {length: task.batch(np.random.Generator(np.random.PCG64(derive_seed(seed, task_name, "eval", length))),
                                  plan.eval_sequences, length) for length in plan.eval_lengths}
    size = budget.model
    started = time.monotonic()
    torch.manual_seed(derive_seed(seed, task_name, "init"))
    model = TinyDecoder(vocab_size=task.vocab_size, d_model=size.d_model, n_heads=size.n_heads,
                        n_layers=size.n_layers, d_ff=size.d_ff,
                        learned_positions=geometry.max_len if SCHEMES[trained_as].absolute == "learned" else 0)
    training = train(model, task, plan, SCHEMES[trained_as], geometry, budget,
                     derive_seed(seed, task_name, "train"), progress, f"{task_name} / {trained_as}: training")
    evaluations = {scheme.name: evaluate(model, task_name, batches, scheme, geometry, progress,
                                         f"{task_name} / {scheme.name}: evaluating")
                   for scheme in groups(scheme_names)[trained_as]}
    run = {"task": task_name, "trained_as": trained_as, "training": training, "evaluations": evaluations}
    return run, round(time.monotonic() - started, 3)


def task_configuration(budget: Budget, task_name: str, scheme_names: list[str], seed: int) -> dict:
    """What the results file records of one task: its source, plan, geometry and every scheme's specs."""
    plan, task, geometry = _setting(budget, task_name, seed)
    return {"task": task.describe(), "plan": dict(vars(plan)),
            "geometry": vars(geometry) | {"head_dim": geometry.head_dim, "extension": geometry.extension},
            "schemes": {scheme.name: describe(scheme, geometry, list(plan.eval_lengths))
                        for members in groups(scheme_names).values() for scheme in members}}


def selected(names: list[str] | None, known, field: str) -> list[str]:
    """`names` (None: all of `known`) checked against `known`, in `known`'s order."""
    if names is None:
        return list(known)
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise PosencError(field, f"unknown {unknown if unknown else 'empty selection'}; choose from {list(known)}")
    return [name for name in known if name in names]


def run_lab(budget: str = "smoke", *, schemes: list[str] | None = None, tasks: list[str] | None = None,
            seed: int = 0, progress: bool = False, jobs: int = 1) -> dict:
    """The lab's results document (posenc.lab.results) for `budget` ("smoke" | "documented"),
    the schemes and tasks given (None: all), `seed`; a progress line on stderr if `progress`. `jobs`
    trained models run at once, each in a process of its own with the budget's threads: the same
    document whatever `jobs` (the seeds derive from names, the runs are listed in the same order)."""
    if budget not in BUDGETS:
        raise PosencError("budget", f"unknown budget {budget!r}; choose from {list(BUDGETS)}")
    plan = BUDGETS[budget]
    scheme_names = selected(schemes, SCHEMES, "schemes")
    task_names = selected(tasks, plan.tasks, "tasks")
    seed = as_int(seed, "seed", minimum=0, maximum=2**63 - 1)
    jobs = as_int(jobs, "jobs", minimum=1, maximum=64)
    units = [(task_name, trained_as) for task_name in task_names for trained_as in groups(scheme_names)]
    bar = Progress(work_units(plan, task_names, scheme_names)) if progress else None
    started_in = results.environment(plan.threads)
    started = time.monotonic()
    if jobs == 1 or len(units) == 1:
        with deterministic(plan.threads):
            done = [run_group(plan, task_name, trained_as, scheme_names, seed, bar) for task_name, trained_as in units]
    else:
        from .parallel import run_groups

        done = run_groups(budget, units, scheme_names, seed, jobs, bar)
    if bar:
        bar.close()
    configurations = {task_name: task_configuration(plan, task_name, scheme_names, seed) for task_name in task_names}
    seconds = {f"{task_name}/{trained_as}": spent for (task_name, trained_as), (_, spent) in zip(units, done)}
    return results.document(plan, seed, configurations, [run for run, _ in done],
                            {"total": round(time.monotonic() - started, 3), "per_model": seconds,
                             "jobs": jobs}, started_in)
