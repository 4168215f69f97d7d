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

`Router.lookup(method, path)` is two dict lookups (the method, then the path itself or for table
paths its template, found by one substring test), returning the tuple of plans to try in order
(() for none).
tests/test_http_plans.py enumerates `plan_table`: every plan has its equivalence cases there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from ..api.codecs import JSON, NPY, RAW
from .fastpath import ROW_ROUTE
from .prepared import ROWS, SPEC_ROUTES

ROW = ROW_ROUTE[1]
_TABLES = "/v1/tables/"


class Plan(NamedTuple):
    name: str
    method: str
    templates: tuple[str, ...]  # the route templates it may answer
    content_types: tuple[str, ...]  # the request bodies it reads ("" for none)
    query: str  # what query string it takes (anything else goes on)
    answer: Callable
    now: bool  # answer(scope, body) runs nothing asynchronous (the protocol may call it)


class Router:
    """The plans by method and template: what `lookup` returns is the tuple to try, in order.

    Everything that depends only on the request's method and route template is worked out here,
    once, when the table is built: per method, a dict from each registered path or template to
    (its plans, its `now` plans). A request then costs one call, a dict lookup for its method and
    one for its path (a table path: its template, found by one substring test), and allocates
    nothing."""

    def __init__(self, plans: list[Plan]):
        self.plans = tuple(plans)
        found: dict[str, dict[str, list[Plan]]] = {}
        for plan in plans:
            for template in plan.templates:
                listed = found.setdefault(plan.method, {}).setdefault(template, [])
                if plan.now and listed and not listed[-1].now:
                    raise ValueError(f"plan {plan.name}: `now` plans come before awaited ones (the pipeline "
                                     f"tries them first, on the body's first message)")
                listed.append(plan)
        self._table = {method: {path: (tuple(ps), tuple(p for p in ps if p.now)) for path, ps in paths.items()}
                       for method, paths in found.items()}

    def find(self, method: str, path: str) -> tuple[tuple[Plan, ...], tuple[Plan, ...]]:
        """(the plans to try for a request, in order; the `now` ones among them): ((), ()) for none."""
        paths = self._table.get(method)
        if paths is None:
            return _NONE
        found = paths.get(path)
        if found is None:
            if not path.startswith(_TABLES):
                return _NONE
            # a table path's template, found coarsely (the plans check the name and position themselves):
            # GET .../rows/..., POST .../rows
            found = paths.get((ROW if "/rows/" in path else path) if method == "GET" else
                              (ROWS if path.endswith("/rows") else path), _NONE)
        return found

    def lookup(self, method: str, path: str) -> tuple[Plan, ...]:
        """The plans to try for a request, in order; () for none."""
        return self.find(method, path)[0]


_NONE: tuple[tuple[Plan, ...], tuple[Plan, ...]] = ((), ())


def plan_table(fast, prepared, computed, service) -> list[Plan]:
    """The worker's plans: the row route, the prepared spec and rows plans, the computed endpoints."""
    return [
        Plan("row", "GET", (ROW,), ("",), "none, or dtype=<name>", fast.answer, True),
        Plan("prepared-spec", "POST", tuple(SPEC_ROUTES), (JSON, RAW), "none (JSON), or spec= and dtype= (raw)",
             prepared.answer, True),
        Plan("prepared-rows", "POST", (ROWS,), (JSON, RAW), "none (JSON), or dtype= (raw)", prepared.answer, True),
        Plan("computed", "POST", tuple(computed.endpoints), (JSON, RAW, NPY), "any", computed.answer, False),
    ]
