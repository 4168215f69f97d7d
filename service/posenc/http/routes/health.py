"""Liveness, readiness and metrics: what orchestrators and Prometheus poll."""

from __future__ import annotations

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse, Response

from ... import native
from ..calls import service_of
from ..schemas import HealthResponse, ReadyResponse

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Alive", response_model=HealthResponse)
async def healthz() -> dict:
    return {"status": "ok", "kernel_path": native.ACTIVE.name if native.ACTIVE else "numba",
            "cpu_features": native.cpu_features()}


@router.get("/readyz", summary="Ready: configured tables attached and kernels warm",
            response_model=ReadyResponse, responses={503: {"model": ReadyResponse, "description": "Not ready"}})
async def readyz(request: Request):
    service = service_of(request)
    missing = service.missing_tables()
    if service.ready and not missing:
        return {"status": "ready", "missing_tables": []}
    return Response(orjson.dumps({"status": "not ready", "missing_tables": missing}), status_code=503,
                    media_type="application/json")


@router.get("/metrics", summary="Prometheus metrics (all workers)", response_class=PlainTextResponse,
            responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}})
async def metrics(request: Request) -> PlainTextResponse:
    text = service_of(request).metrics.render()
    return PlainTextResponse(text, media_type="text/plain; version=0.0.4")
