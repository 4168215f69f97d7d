"""/explore: the explorer page, its assets, and the figures it shows (SVG drawn here by posenc.plots).

POST /explore/figures/{figure} takes {"source": {"table": name} | {"spec"} | {"specs"} | {"config"},
"params": {...}, "format": "svg" | "vega" | "csv"} and answers {"svg": "...", "summary": {...}} (or
{"vega": spec, "data": numbers, ...}, or {"csv": "...", ...}: the page's CSV export); /explore/figures/audit
takes {"report": <a POST /v1/audit answer>} and the same formats, /explore/figures/lab {"results": <a
`posenc lab` results file>} (none: the documented run shipped with posenc, which GET /explore/lab/documented
answers) and the same formats.
"""

from __future__ import annotations

from typing import Any, Literal

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import Field

from ....errors import PosencError
from ....explore import ASSETS, CSP, asset, media_type
from ....lab import results as lab_results
from ....plots import FIGURES, render, render_audit, render_lab
from ..calls import read_call, service_of
from ..errors import HttpError
from ..openapi import error_responses, request_body
from ..schemas import _Strict
from .rows import named_table

router = APIRouter(prefix="/explore", tags=["explore"])
#: What a figure request may ask for: posenc.plots' formats that are text (PNG is `posenc plot`'s only).
FORMATS = ("svg", "vega", "csv")
#: Cost estimate that sends figure rendering (~0.2-1 s of matplotlib) to a worker thread.
FIGURE_COST_NS = 1e9
_HEADERS = {"content-security-policy": CSP, "x-content-type-options": "nosniff", "cache-control": "no-cache"}


class FigureRequest(_Strict):
    source: dict[str, Any] = Field(default_factory=dict,
                                   description='{"table": name} | {"spec": {...}} | {"specs": [...]} | {"config": {...}}')
    params: dict[str, Any] = Field(default_factory=dict, description="figure parameters (see posenc plot --help)")
    format: Literal[FORMATS] = Field("svg", description="svg: a drawn figure; vega: the explorer's interactive "
                                     "Vega-Lite spec and the numbers behind it; csv: the figure's points")


class AuditFigureRequest(_Strict):
    report: dict[str, Any] = Field(description="a report from POST /v1/audit")
    format: Literal[FORMATS] = "svg"


class LabFigureRequest(_Strict):
    results: dict[str, Any] | None = Field(None, description='a `posenc lab` results file ("format": '
                                           f'"{lab_results.FORMAT}"); none: the documented-size run shipped with '
                                           "posenc (GET /explore/lab/documented)")
    format: Literal[FORMATS] = "svg"


def _asset_response(name: str) -> Response:
    return Response(asset(name), media_type=media_type(name), headers=_HEADERS)


@router.get("", summary="The explorer page", response_class=Response, include_in_schema=True)
async def page() -> Response:
    return _asset_response("explore.html")


@router.get("/assets/{name}", summary="A script or style of the explorer page", response_class=Response,
            responses=error_responses(404))
async def assets(name: str) -> Response:
    if name not in ASSETS:
        raise HttpError("not_found", f"no explorer asset {name!r}", "name")
    return _asset_response(name)


async def _source(request: Request, source: dict) -> dict:
    """A {"table": name} source as the table's spec; anything else as given."""
    if set(source) == {"table"}:
        if not isinstance(source["table"], str):
            raise PosencError("source.table", "must be a table name")
        table = await named_table(request, source["table"])
        return {"spec": {**table.spec.encoding.to_dict(), "label": table.name}}
    return source


def _figure_response(drawn, summary: dict, fmt: str) -> Response:
    body = {**drawn, "summary": summary} if isinstance(drawn, dict) else {fmt: drawn.decode("utf-8"),
                                                                        "summary": summary}
    return Response(orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY), media_type="application/json")


@router.post("/figures/audit", summary="The audit's error-vs-position figure (SVG in JSON)",
             responses=error_responses(400, 406, 413, 415, 422), openapi_extra=request_body(AuditFigureRequest))
async def audit_figure(request: Request) -> Response:
    call = await read_call(request, AuditFigureRequest)
    drawn, summary = await service_of(request).run(lambda: render_audit(call.params.report, call.params.format),
                                                   FIGURE_COST_NS)
    return _figure_response(drawn, summary, call.params.format)


@router.post("/figures/lab", summary="A `posenc lab` results file drawn (SVG in JSON); none: the documented run",
             responses=error_responses(400, 406, 413, 415, 422), openapi_extra=request_body(LabFigureRequest, required=False))
async def lab_figure(request: Request) -> Response:
    call = await read_call(request, LabFigureRequest)
    doc, fmt = call.params.results, call.params.format
    drawn, summary = await service_of(request).run(
        lambda: render_lab(lab_results.documented() if doc is None else doc, fmt), FIGURE_COST_NS)
    return _figure_response(drawn, summary, fmt)


#: GET /explore/lab/documented's answer: a JSON object (the results file's format is docs/lab.md's).
_RESULTS_FILE = {200: {"description": "The results file (docs/lab.md reports it)",
                       "content": {"application/json": {"schema": {"type": "object"}}}}}


@router.get("/lab/documented", summary="The documented-size `posenc lab` results file shipped with posenc",
            response_class=Response, responses=_RESULTS_FILE)
async def lab_documented() -> Response:
    return Response(lab_results.DOCUMENTED.read_bytes(), media_type="application/json")


@router.post("/figures/{figure}", summary="One explorer figure (SVG in JSON) for a table, specs or a config",
             responses=error_responses(400, 404, 406, 413, 415, 422), openapi_extra=request_body(FigureRequest))
async def figure(request: Request, figure: str) -> Response:
    if figure not in FIGURES:
        raise HttpError("not_found", f"no figure {figure!r}; one of {sorted(FIGURES)}, audit or lab", "figure")
    call = await read_call(request, FigureRequest)
    source = await _source(request, call.params.source)
    drawn, summary = await service_of(request).run(
        lambda: render(figure, source, call.params.params, call.params.format), FIGURE_COST_NS)
    return _figure_response(drawn, summary, call.params.format)
