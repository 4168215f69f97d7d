"""The FastAPI routers, one module per area."""

from . import audit, encodings, explore, health, index, info, models, pick, rows, tables

ROUTERS = (index.router, health.router, info.router, encodings.router, models.router, tables.router,
           rows.router, audit.router, pick.router, explore.router)
