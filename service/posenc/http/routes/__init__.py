"""The FastAPI routers, one module per area."""

from . import encodings, health, info, rows, tables

ROUTERS = (health.router, info.router, encodings.router, tables.router, rows.router)
