"""The FastAPI routers, one module per area."""

from . import encodings, health, rows, tables

ROUTERS = (health.router, encodings.router, tables.router, rows.router)
