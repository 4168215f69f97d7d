"""`posenc serve`: the HTTP service (and, later, the binary protocol) on the configured tables."""

from __future__ import annotations

from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser("serve", help="run the HTTP service (tables built once into shared memory)")
    p.add_argument("--config", type=Path, help="TOML config (default: the embedded one, see deploy/posenc.toml)")
    p.add_argument("--host", help="listen address (default from the config: 127.0.0.1)")
    p.add_argument("--port", type=int, help="HTTP port (default from the config: 8000)")
    p.add_argument("--workers", type=int, help="worker processes (0 = one per core)")
    p.set_defaults(handler=run)


def run(args) -> int:
    from .. import config as service_config
    from ..http.runtime.server import serve

    config = service_config.load(args.config).with_overrides(host=args.host, port=args.port, workers=args.workers)
    return serve(config)
