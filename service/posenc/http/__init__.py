"""The HTTP service: FastAPI routes behind a raw-ASGI layer (limits, metrics, the hot row route).

`create_app()` builds the ASGI app; `posenc serve` (posenc.http.runtime.server) runs it under uvicorn.
"""

from .app import create_app

__all__ = ["create_app"]
