"""A worker's runtime: `posenc serve` (server.py) and its launcher for tests and benches, the
worker's Service (tables, metrics, readiness, jobs), warm-up, metrics, the byte-bounded caches
charged to the budget, and the ledger of tables created over HTTP."""
