"""`create_app`: the FastAPI API wrapped in the service's ASGI layer (limits, metrics, fast row route).

    uvicorn.run(create_app(config))                         # in-process, standalone
    uvicorn "posenc.http.app:create_app" --factory          # a `posenc serve` worker: config from env
"""

from __future__ import annotations

import json
import os
from contextlib import asynccontextmanager

from fastapi import FastAPI

from .. import __version__
from ..config import ServiceConfig
from .api import errors, openapi
from .transport import protocol
from .pipeline.asgi import ServiceApp
from .api.compress import GzipJson
from .api.routes import ROUTERS, docs
from .runtime.service import Service

#: How `posenc serve` hands its resolved config and run directory to worker processes.
STATE_ENV = "POSENC_SERVE_STATE"
DESCRIPTION = """Exact positional encodings over HTTP: sinusoidal, RoPE (cos/sin, rotation of q/k, inverse
frequencies), ALiBi, T5 buckets, computed from a spec or read from shared-memory tables.

Responses are JSON by default; send `Accept: application/x-npy` or `application/octet-stream` (raw
little-endian, dtype and shape in the `X-Posenc-Dtype` / `X-Posenc-Shape` headers) for binary. Array
bodies (positions, q/k) may be binary too, the other fields then in the query string. Errors are
`{"error": {"code", "message", "field"}}`."""


def serve_state(config: ServiceConfig, run_dir: str) -> str:
    return json.dumps({"config": config.to_dict(), "run_dir": run_dir})


def create_app(config: ServiceConfig | None = None, *, run_dir: str | None = None, plans: bool = True) -> ServiceApp:
    """The ASGI app. Without a config, read the one `posenc serve` put in $POSENC_SERVE_STATE. With
    `plans=False` the plan table (pipeline/plans.py) is empty: FastAPI answers every request."""
    if config is None:
        state = json.loads(os.environ[STATE_ENV])
        config, run_dir = ServiceConfig.from_dict(state["config"]), state["run_dir"]

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        await service.start()
        try:
            yield
        finally:
            await service.stop()

    config.check_serveable()
    api = FastAPI(title="posenc", version=__version__, description=DESCRIPTION, lifespan=lifespan, docs_url=None,
                  redoc_url=None, redirect_slashes=False)  # a redirect would be built from the Host header
    for router in ROUTERS:
        api.include_router(router)
    docs.install(api)
    api.add_middleware(GzipJson)  # whole JSON documents; arrays compress themselves (responses.py)
    routes = [(method, route.path) for router in ROUTERS for route in router.routes
              for method in sorted(route.methods)]
    errors.install(api, routes)
    openapi.install(api, config.server.require_api_key)
    service = Service(config, run_dir, routes)
    protocol.configure(config.server.header_timeout_s, config.limits.max_head_bytes, config.server.body_timeout_s)
    api.state.service = service
    return ServiceApp(api, service, plans)
