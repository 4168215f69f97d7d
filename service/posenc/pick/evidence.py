"""The lab's measurements as evidence: a `posenc lab` results file (the documented-size run shipped
with posenc unless another is given), read for one task's headline metric of one scheme at one
length, and cited by file and JSON path, so a reader can open the row a reason rests on.

A length is chosen by its ratio to the training length, the quantity that carries over from the
lab's tiny models to a real one: a target 8 times the original context is read at 8 times the lab's
training length.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import PosencError
from ..lab import results
from ..lab.metrics import HEADLINE

#: How the shipped run is named in citations (its path inside an installed posenc).
DOCUMENTED_LABEL = "posenc/lab/documented.json"


@dataclass(frozen=True)
class LabFile:
    doc: dict
    label: str

    @classmethod
    def documented(cls) -> LabFile:
        return _documented()

    @classmethod
    def read(cls, path: str | Path) -> LabFile:
        return cls.of(results.read(path), str(path))

    @classmethod
    def of(cls, doc: dict, label: str) -> LabFile:
        """A results document given whole (the HTTP route's), checked to hold what pick reads."""
        results.checked(doc)
        try:
            results.rows(doc)
            for task in doc["configuration"]["tasks"].values():
                int(task["geometry"]["train_len"])
        except (KeyError, TypeError, ValueError, AttributeError):
            raise PosencError("results", "is not a complete posenc lab results file") from None
        return cls(doc, label)

    def describe(self) -> dict:
        environment = self.doc.get("environment", {})
        return {"file": self.label, "budget": self.doc["configuration"]["budget"].get("name"),
                "seed": self.doc["configuration"].get("seed"), "cpu": environment.get("cpu"),
                "torch": environment.get("torch"), "posenc_commit": environment.get("posenc_commit")}

    def has(self, task: str, scheme: str) -> bool:
        return self._find(task, scheme) is not None

    def train_len(self, task: str) -> int:
        return int(self.doc["configuration"]["tasks"][task]["geometry"]["train_len"])

    def longest_ratio(self, task: str) -> float:
        return max(self.lengths(task)) / self.train_len(task)

    def lengths(self, task: str) -> list[int]:
        for name, _, points in results.rows(self.doc):
            if name == task:
                return [p["length"] for p in points]
        raise PosencError("results", f"holds no {task!r} task")

    def length_for(self, task: str, ratio: float) -> int:
        """The shortest evaluated length at least `ratio` times the training length (the longest if none is)."""
        train_len = self.train_len(task)
        lengths = sorted(self.lengths(task))
        return next((length for length in lengths if length >= ratio * train_len - 1e-9), lengths[-1])

    def _find(self, task: str, scheme: str) -> tuple[int, list[dict]] | None:
        for index, run in enumerate(self.doc["results"]):
            if run["task"] == task and scheme in run["evaluations"]:
                return index, run["evaluations"][scheme]
        return None

    def value(self, task: str, scheme: str, length: int) -> float | None:
        return self.cite(task, scheme, length)["value"]

    def cite(self, task: str, scheme: str, length: int) -> dict:
        """The evidence of `scheme`'s headline metric on `task` at `length`: file, JSON path, value."""
        found = self._find(task, scheme)
        if found is None:
            raise PosencError("results", f"holds no {task!r} evaluation of {scheme!r}")
        index, points = found
        position = next((i for i, p in enumerate(points) if p["length"] == length), None)
        if position is None:
            raise PosencError("results", f"holds no {task!r} evaluation of {scheme!r} at length {length}")
        metric = HEADLINE[task][0]
        return {"kind": "lab", "file": self.label, "path": f"results[{index}].evaluations.{scheme}[{position}]",
                "task": task, "scheme": scheme, "length": length, "train_len": self.train_len(task),
                "metric": metric, "value": points[position][metric]}

    def best(self, task: str, schemes: list[str], length: int) -> str:
        """The scheme of `schemes` (those the file holds) with the best headline metric at `length`."""
        present = [scheme for scheme in schemes if self.has(task, scheme)]
        if not present:
            raise PosencError("results", f"holds no {task!r} evaluation of any of {schemes}")
        higher_better = HEADLINE[task][1]

        def score(scheme: str) -> float:
            value = self.value(task, scheme, length)
            if value is None:  # a diverged run: last
                return float("-inf")
            return value if higher_better else -value

        return max(present, key=score)

    def chance(self, task: str) -> float:
        return HEADLINE[task][2](self.doc["configuration"]["tasks"][task]["task"]["vocab"])


@lru_cache(maxsize=1)
def _documented() -> LabFile:
    return LabFile.of(results.documented(), DOCUMENTED_LABEL)


def describe_point(evidence: dict) -> str:
    """One line for a lab citation: what was measured where."""
    value = evidence["value"]
    shown = "n/a" if value is None else f"{value:.3f}" if evidence["metric"] == "accuracy" else f"{value:.2f}"
    return (f"{evidence['scheme']}: {evidence['task']} {evidence['metric']} {shown} at length {evidence['length']} "
            f"({evidence['length'] / evidence['train_len']:g}x the training length)")
