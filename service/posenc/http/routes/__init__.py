"""The FastAPI routers, one module per area."""

from . import encodings, health, models, rows, tables

ROUTERS = (health.router, encodings.router, models.router, tables.router, rows.router)
