"""GET /info: what this instance is (versions, kernel path, limits, tables), for operators and clients."""

from __future__ import annotations

import dataclasses
import gc
import platform
from importlib.metadata import PackageNotFoundError, version

import anyio.to_thread
from fastapi import APIRouter, Request

from .... import __version__, native
from ....kernels import active
from ....shm import list_tables
from ..calls import service_of
from ..schemas import InfoResponse, public_table_info

router = APIRouter(tags=["health"])
#: Distributions whose versions decide results or behaviour.
COMPONENTS = ("numpy", "numba", "ml-dtypes", "fastapi", "uvicorn", "orjson")


def _version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


@router.get("/info", summary="Versions, kernel path, limits and tables of this instance", response_model=InfoResponse)
async def info(request: Request) -> dict:
    service = service_of(request)
    config = service.config
    tables = await anyio.to_thread.run_sync(list_tables, config.server.shm_dir)
    return {
        "version": __version__,
        "python": platform.python_version(),
        "components": {name: _version(name) for name in COMPONENTS},
        "kernel_path": active.NAME,
        "cpu_features": native.cpu_features(),
        "limits": dataclasses.asdict(config.limits),
        "timeouts_s": {key: getattr(config.server, key) for key in ("header_timeout_s", "body_timeout_s",
                                                                     "keep_alive_s", "drain_timeout_s")},
        "require_api_key": config.server.require_api_key,
        "table_management": config.api_key is not None,
        "tables": [public_table_info(t) for t in tables if t.state == "READY"],
        "gc_frozen_objects": gc.get_freeze_count(),
    }
