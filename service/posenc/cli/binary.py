"""`posenc binary-serve`: run the native binary-protocol server alone, in the foreground.

Defaults come from the service config ([server] host, binary_port, binary_socket, shm_dir,
drain_timeout_s), so it serves the tables `posenc serve` / `posenc table build` publish.
Flags after `--` go to posenc-server unchanged (`posenc-server --help` lists them)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..errors import PosencError
from .options import add_flag


def register(sub) -> None:
    p = sub.add_parser("binary-serve", help="run the native binary-protocol server (docs/protocol.md)")
    p.add_argument("--config", type=Path, help="the service's TOML config (default: the embedded one)")
    p.add_argument("--host", help="listen address (default from the config: 127.0.0.1)")
    add_flag(p, "--binary-port", old=("--port",), type=int, metavar="PORT",
             help="binary-protocol TCP port (default: [server] binary_port, 8001; 0 = no TCP listener)")
    add_flag(p, "--binary-socket", old=("--unix",), metavar="PATH",
             help="binary-protocol Unix socket, also or instead (default: [server] binary_socket)")
    p.add_argument("--threads", type=int, default=0, help="event-loop threads (default: one per CPU)")
    p.add_argument("--shm-dir", help="table store (default: [server] shm_dir)")
    p.add_argument("--io", choices=("auto", "uring", "epoll"),
                   help="event loop (default auto: io_uring where the build and kernel allow it, else epoll)")
    p.add_argument("--print-argv", action="store_true", help="print the server command line instead of running it")
    p.add_argument("server_args", nargs=argparse.REMAINDER, help="-- then flags for posenc-server itself")
    p.set_defaults(handler=run)


def run(args) -> int:
    from .. import config as service_config
    from ..client.process import service_argv

    config = service_config.load(args.config).with_overrides(host=args.host, binary_port=args.binary_port,
                                                              binary_socket=args.binary_socket, shm_dir=args.shm_dir)
    argv = service_argv(config, threads=args.threads)
    if argv is None:
        raise PosencError("binary-port", "the binary server has neither a TCP port nor a Unix socket to listen on "
                          "(--binary-port 0 turns TCP off: give --binary-socket PATH)")
    if args.io:
        argv += ["--io", args.io]
    argv += [a for a in args.server_args if a != "--"]
    if args.print_argv:
        print(" ".join(argv))
        return 0
    os.execv(argv[0], argv)  # the server takes over this process: signals reach it directly
    return 0
