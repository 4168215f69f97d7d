"""GET /: where this service's pages are. A browser or curl pointed at the bare address (what
`make run` prints) learns where the API docs, the explorer and the probes live instead of a 404."""

from __future__ import annotations

from fastapi import APIRouter, Request

from .... import __version__
from ..schemas import IndexResponse
from .docs import DOCS_PATH
from .explore import router as explore_router

router = APIRouter(tags=["health"])

#: (path, what it is), in the order a newcomer wants them.
PAGES = (
    (DOCS_PATH, "API docs: every route with its parameters, tried from the browser (Swagger UI)"),
    (explore_router.prefix, "the explorer: figures of any encoding or a model's config.json, and audits"),
    ("/openapi.json", "the OpenAPI description of every route, for client generators"),
    ("/healthz", "liveness: the process answers"),
    ("/readyz", "readiness: the configured tables are published and the kernels warm"),
    ("/info", "versions, kernel path, limits and tables of this instance"),
    ("/metrics", "Prometheus metrics of every worker"),
)


@router.get("/", summary="Where the docs, the explorer and the probes are", response_model=IndexResponse,
            operation_id="index")
@router.head("/", summary="Where the docs are (headers only)", response_model=IndexResponse, operation_id="index_head")
async def index(request: Request) -> dict:
    root = request.scope.get("root_path", "")  # behind a proxy that mounts the service under a prefix
    return {"service": "posenc", "version": __version__,
            "links": [{"path": f"{root}{path}", "about": about} for path, about in PAGES]}
