"""Liveness, readiness and metrics: what orchestrators and Prometheus poll."""

from __future__ import annotations

import anyio
import orjson
from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse, Response

from .... import native
from ....kernels import active
from ....client import ProtocolError, ServerError, fetch_stats
from ...runtime.metrics import render_binary
from ..calls import service_of
from ..schemas import HealthResponse, ReadyResponse

router = APIRouter(tags=["health"])


def binary_address(config):
    """Where this service's binary-protocol server listens: (host, port), 'unix:/path' or None (off)."""
    server = config.server
    if server.binary_port:
        return ("127.0.0.1" if server.host in ("0.0.0.0", "") else server.host, server.binary_port)
    return f"unix:{server.binary_socket}" if server.binary_socket else None


def _binary_stats(address) -> dict | None:
    try:
        return fetch_stats(address, timeout=0.5)
    except (OSError, ProtocolError, ServerError):
        return None


@router.get("/healthz", summary="Alive", response_model=HealthResponse, operation_id="healthz")
@router.head("/healthz", summary="Alive (headers only)", response_model=HealthResponse, operation_id="healthz_head")
async def healthz() -> dict:
    return {"status": "ok", "kernel_path": active.NAME,
            "cpu_features": native.cpu_features()}


@router.get("/readyz", summary="Ready: configured tables attached and kernels warm", operation_id="readyz",
            response_model=ReadyResponse, responses={503: {"model": ReadyResponse, "description": "Not ready"}})
@router.head("/readyz", summary="Ready (headers only)", operation_id="readyz_head",
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
    service = service_of(request)
    text = service.metrics.render()
    address = binary_address(service.config)
    if address is not None:
        text += render_binary(await anyio.to_thread.run_sync(_binary_stats, address))
    return PlainTextResponse(text, media_type="text/plain; version=0.0.4")
