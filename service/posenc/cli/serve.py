"""`posenc serve`: the HTTP service and the binary-protocol sidecar on the configured tables."""

from __future__ import annotations

from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser("serve", help="run the HTTP service (tables built once into shared memory)")
    p.add_argument("--config", type=Path, help="the service's TOML config (default: the embedded one, see deploy/posenc.toml)")
    p.add_argument("--host", help="listen address (default from the config: 127.0.0.1)")
    p.add_argument("--port", type=int, help="HTTP port (default from the config: 8000)")
    p.add_argument("--workers", type=int, help="worker processes (0 = one per core)")
    p.add_argument("--binary-port", type=int, help="binary-protocol TCP port of the posenc-server sidecar "
                   "(default from the config: 8001; 0 = no TCP listener)")
    p.add_argument("--binary-socket", help="binary-protocol Unix socket of the sidecar (default from the config: none)")
    p.add_argument("--shm-dir", help="table store (default from the config or $POSENC_SHM_DIR: /dev/shm)")
    p.add_argument("--max-abs-position", metavar="N",
                   help="largest |position| served by HTTP, the library in every worker and the binary "
                   "sidecar: an integer from 1 to 2^53 as digits or exponent form, e.g. 1e13 (default: "
                   "$POSENC_MAX_ABS_POSITION, else [limits] max_abs_position, else 2^53 = 9007199254740992; "
                   "the flag wins over the environment, the environment over the file)")
    p.set_defaults(handler=run)


def run(args) -> int:
    from .. import config as service_config
    from ..errors import PosencError
    from ..http.runtime.server import serve
    from ..limits import parse_max_abs_position

    max_abs_position = None
    if args.max_abs_position is not None:
        try:
            max_abs_position = parse_max_abs_position(args.max_abs_position)
        except ValueError as exc:
            raise PosencError("--max-abs-position", str(exc)) from None
    config = service_config.load(args.config).with_overrides(
        host=args.host, port=args.port, workers=args.workers, binary_port=args.binary_port,
        binary_socket=args.binary_socket, shm_dir=args.shm_dir, max_abs_position=max_abs_position)
    return serve(config)
