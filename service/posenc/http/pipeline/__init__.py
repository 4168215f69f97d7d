"""The request pipeline: each rule applied once (asgi.py, in order: request id and API key
(headers.py), CORS (cors.py), body limit and deadline (limits.py), memory budget (budget.py),
concurrency), then the plans that answer hot request shapes without FastAPI (fastpath.py: one
table row; prepared.py: spec and rows requests; fastcompute.py: computed routes' endpoints called
directly), else the FastAPI app (http.api)."""
