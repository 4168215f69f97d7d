"""The FastAPI routers, one module per area."""

from . import audit, encodings, explore, health, info, models, rows, tables

ROUTERS = (health.router, info.router, encodings.router, models.router, tables.router, rows.router, audit.router,
           explore.router)
