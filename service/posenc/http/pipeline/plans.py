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
template, found by one substring test), returning the tuple of plans to try in order (() for none).
tests/test_http_plans.py enumerates `plan_table`: every plan has its equivalence cases there.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

from ..api.codecs import JSON, NPY, RAW
from .fastpath import ROW_ROUTE
from .prepared import ROWS, SPEC_ROUTES

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


def shape_of(method: str, path: str) -> str:
    """The route template a table path's plans are registered under, found coarsely (the plans
    check the name and position themselves): GET .../rows/..., POST .../rows."""
    if method == "GET":
        return ROW if "/rows/" in path else path
    return ROWS if path.endswith("/rows") else path


class Router:
    """The plans by method and template: what `lookup` returns is the tuple to try, in order."""

    def __init__(self, plans: list[Plan]):
        self.plans = tuple(plans)
        found: dict[tuple[str, str], list[Plan]] = {}
        for plan in plans:
            for template in plan.templates:
                found.setdefault((plan.method, template), []).append(plan)
        self._all = {key: tuple(ps) for key, ps in found.items()}
        self._now = {key: tuple(p for p in ps if p.now) for key, ps in found.items() if any(p.now for p in ps)}

    def lookup(self, method: str, path: str) -> tuple[Plan, ...]:
        """The plans to try for a request, in order; () for none. Two dict lookups at most."""
        found = self._all.get((method, path))
        if found is None:
            if not path.startswith(_TABLES):
                return ()
            # shape_of, inlined: this runs for every row request
            found = self._all.get((method, (ROW if "/rows/" in path else path) if method == "GET" else
                                            (ROWS if path.endswith("/rows") else path)), ())
        return found

    def now(self, method: str, path: str) -> tuple[Plan, ...]:
        """The `now` plans of `lookup` (what the protocol may answer without an ASGI task)."""
        found = self._now.get((method, path))
        if found is None:
            if not path.startswith(_TABLES):
                return ()
            # shape_of, inlined: this runs for every row request
            found = self._now.get((method, (ROW if "/rows/" in path else path) if method == "GET" else
                                            (ROWS if path.endswith("/rows") else path)), ())
        return found


def plan_table(fast, prepared, computed, service) -> list[Plan]:
    """The worker's plans: the row route, the prepared spec and rows plans, the computed endpoints."""
    return [
        Plan("row", "GET", (ROW,), ("",), "none, or dtype=<name>", fast.answer, True),
        Plan("prepared-spec", "POST", tuple(SPEC_ROUTES), (JSON, RAW), "none (JSON), or spec= and dtype= (raw)",
             prepared.answer, True),
        Plan("prepared-rows", "POST", (ROWS,), (JSON, RAW), "none (JSON), or dtype= (raw)", prepared.answer, True),
        Plan("computed", "POST", tuple(computed.endpoints), (JSON, RAW, NPY), "any", computed.answer, False),
    ]
