"""The plans: one table of the prepared answers for request shapes, and the router that consults it.

A plan answers one request shape (method, path template, content types, query) faster than
FastAPI would, with the same bytes and headers; it answers only a 200 and returns None (or
False) for anything else, which then goes to the next plan of its shape and finally to FastAPI.
Plans apply no rule: the request id, API key, CORS, body limit, memory budget (what the request
body holds) and concurrency are applied once, by the pipeline (asgi.py), before any plan is
asked, whichever plan answers. A plan that holds bytes of its own (a response being encoded)
holds them in the same MemoryBudget and gives them back in `Answer.done`.

Two kinds:
  * `now` plans run nothing asynchronous: `answer(scope, body) -> Answer | None`. The pipeline
    calls them after its rules, and so does posenc's protocol through `ServiceApp.answer_now`
    (the same rules, then the same plans), which writes the answer without an ASGI task;
  * the others are awaited: `answer(scope, receive, send, body) -> bool` (sent, or not).

`Router.lookup(method, path)` is a dict lookup (the path itself, or for table paths its
template found by one partition), returning the tuple of plans to try in order (() for none).
tests/test_http_plans.py enumerates `plan_table`: every plan has its equivalence cases there.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

from ..api.codecs import JSON, NPY, RAW
from .fastpath import ROW_ROUTE
from .prepared import ROWS, SPEC_ROUTES, Answer

ROW = ROW_ROUTE[1]
_TABLES = "/v1/tables/"
_TABLES_LEN = len(_TABLES)


class Plan(NamedTuple):
    name: str
    method: str
    templates: tuple[str, ...]  # the route templates it may answer
    content_types: tuple[str, ...]  # the request bodies it reads ("" for none)
    query: str  # what query string it takes (anything else goes on)
    answer: Callable
    now: bool  # answer(scope, body) runs nothing asynchronous (the protocol may call it)


def shape_of(path: str) -> str:
    """The route template a plan is registered under: the path itself but for table paths."""
    if path.startswith(_TABLES):
        name, sep, tail = path[_TABLES_LEN:].partition("/rows")
        if sep and name and "/" not in name:
            if not tail:
                return ROWS
            if tail[0] == "/" and "/" not in tail[1:]:
                return ROW
    return path


class Router:
    """The plans by method and template: what `lookup` returns is the tuple to try, in order."""

    def __init__(self, plans: list[Plan]):
        self.plans = tuple(plans)
        found: dict[str, dict[str, list[Plan]]] = {}
        for plan in plans:
            for template in plan.templates:
                found.setdefault(plan.method, {}).setdefault(template, []).append(plan)
        self._all = {method: {t: tuple(p) for t, p in by.items()} for method, by in found.items()}
        self._now = {method: {t: tuple(p for p in ps if p.now) for t, ps in by.items() if any(p.now for p in ps)}
                     for method, by in found.items()}

    def lookup(self, method: str, path: str) -> tuple[Plan, ...]:
        return self._find(self._all, method, path)

    def now(self, method: str, path: str) -> tuple[Plan, ...]:
        return self._find(self._now, method, path)

    @staticmethod
    def _find(table, method: str, path: str) -> tuple[Plan, ...]:
        by_path = table.get(method)
        if by_path is None:
            return ()
        found = by_path.get(path)
        if found is None:
            found = by_path.get(shape_of(path), ())
        return found


def plan_table(fast, prepared, computed, service) -> list[Plan]:
    """The worker's plans: the row route, the prepared spec and rows plans, the computed endpoints."""
    def row(scope, body: bytes) -> Answer | None:
        found = fast.answer(scope)
        if found is None:
            return None
        payload, headers = found
        return Answer(service, service.metrics.layout.index[ROW_ROUTE], [*headers, (b"content-length", str(len(payload)).encode("ascii"))],
                      payload, True, 0)

    return [
        Plan("row", "GET", (ROW,), ("",), "none, or dtype=<name>", row, True),
        Plan("prepared-spec", "POST", tuple(SPEC_ROUTES), (JSON, RAW), "none (JSON), or spec= and dtype= (raw)",
             prepared.answer, True),
        Plan("prepared-rows", "POST", (ROWS,), (JSON, RAW), "none (JSON), or dtype= (raw)", prepared.answer, True),
        Plan("computed", "POST", tuple(computed.endpoints), (JSON, RAW, NPY), "any", computed.answer, False),
    ]
