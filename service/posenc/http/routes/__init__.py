"""The FastAPI routers, one module per area."""

from . import audit, encodings, explore, health, rows, tables

ROUTERS = (health.router, encodings.router, tables.router, rows.router, audit.router, explore.router)
