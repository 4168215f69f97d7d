"""`posenc lab --jobs N`: the trained models of a run in N processes at once. Each group (one trained
model and its evaluations, `run.run_group`) depends only on its names and the seed, so a worker
computes exactly what the serial run does; the workers' progress comes back through a queue to the
one progress line. Processes are spawned, not forked: torch's thread pools do not survive a fork.
"""

from __future__ import annotations

import multiprocessing
import queue
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait

from .progress import Progress

#: Seconds between the parent's looks at the workers' progress.
POLL = 0.2


class _Reporter:
    """Progress.update's signature, sent to the parent's progress line."""

    def __init__(self, channel):
        self.channel = channel

    def update(self, stage: str, advance: float = 0.0, detail: str = "") -> None:
        self.channel.put((stage, advance, detail))


def _group(budget: str, task_name: str, trained_as: str, scheme_names: list[str], seed: int, channel):
    from .budgets import BUDGETS
    from .run import deterministic, run_group

    plan = BUDGETS[budget]
    with deterministic(plan.threads):
        return run_group(plan, task_name, trained_as, scheme_names, seed, _Reporter(channel) if channel else None)


def _drain(channel, bar: Progress | None) -> None:
    while True:
        try:
            stage, advance, detail = channel.get_nowait()
        except queue.Empty:
            return
        if bar:
            bar.update(stage, advance, detail)


def run_groups(budget: str, units: list[tuple[str, str]], scheme_names: list[str], seed: int, jobs: int,
               bar: Progress | None) -> list[tuple[dict, float]]:
    """run_group for each (task, trained_as) of `units`, `jobs` at a time; results in the order of `units`."""
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager, ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        channel = manager.Queue() if bar else None
        futures = [pool.submit(_group, budget, task_name, trained_as, scheme_names, seed, channel)
                   for task_name, trained_as in units]
        pending = set(futures)
        while pending:
            finished, pending = wait(pending, timeout=POLL, return_when=FIRST_EXCEPTION)
            if channel is not None:
                _drain(channel, bar)
            failed = next((future.exception() for future in finished if future.exception() is not None), None)
            if failed is not None:
                for other in pending:
                    other.cancel()
                raise failed
        return [future.result() for future in futures]
