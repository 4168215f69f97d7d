"""Finding, starting and stopping the native server (`native/build/posenc-server`).

`posenc binary-serve`, the tests, the QPS benchmark and `posenc serve` (as a sidecar, through
`service_argv`) all start it through here."""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Self

from ..errors import PosencError

BINARY_ENV = "POSENC_SERVER_BIN"
REPO_BINARY = Path(__file__).resolve().parents[3] / "native" / "build" / "posenc-server"

#: Keyword arguments of server_argv that become flags of the same name (see `posenc-server --help`).
SERVER_FLAGS = ("max_frame_bytes", "max_positions", "max_response_bytes", "max_connections", "idle_timeout_ms",
                "drain_timeout_ms", "max_dim", "max_abs_position", "busy_poll_us", "max_table_ids", "io")


def server_binary() -> str:
    """$POSENC_SERVER_BIN, else the binary `make native-server` builds, else posenc-server on PATH."""
    for candidate in (os.environ.get(BINARY_ENV), REPO_BINARY, shutil.which("posenc-server")):
        if candidate and os.access(candidate, os.X_OK):
            return str(candidate)
    raise PosencError("server", f"posenc-server not found: run `make native-server` (builds {REPO_BINARY}) "
                      f"or set {BINARY_ENV}")


def server_argv(*, host: str | None = "127.0.0.1", port: int = 8001, unix_path: str | None = None,
                shm_dir: str | None = None, threads: int = 0, **flags) -> list[str]:
    """The command line for a server; host=None (or port=None) means no TCP listener."""
    argv = [server_binary()]
    if host is None or port is None:
        argv.append("--no-tcp")
    else:
        argv += ["--host", host, "--port", str(port)]
    if unix_path:
        argv += ["--unix", str(unix_path)]
    if shm_dir:
        argv += ["--shm-dir", str(shm_dir)]
    if threads:
        argv += ["--threads", str(threads)]
    for key, value in flags.items():
        if key not in SERVER_FLAGS:
            raise PosencError(key, f"is not a server flag; known: {list(SERVER_FLAGS)}")
        argv += ["--" + key.replace("_", "-"), str(value)]
    return argv


def service_argv(config, *, threads: int = 0) -> list[str] | None:
    """The server command line for a `posenc.config.ServiceConfig` ([server] binary_port,
    binary_socket, host, shm_dir, drain_timeout_s; [limits] max_abs_position, so the binary
    server refuses the positions HTTP refuses); None when both binary listeners are off."""
    server = config.server
    if not server.binary_port and not server.binary_socket:
        return None
    return server_argv(host=server.host if server.binary_port else None, port=server.binary_port or None,
                       unix_path=server.binary_socket or None, shm_dir=server.shm_dir, threads=threads,
                       drain_timeout_ms=int(server.drain_timeout_s * 1000),
                       max_abs_position=config.limits.max_abs_position)


def pinned(cpus: set[int] | None, argv: list[str]) -> list[str]:
    """argv run under `taskset` on these CPUs (the process and every thread it starts), or as is."""
    if not cpus:
        return list(argv)
    return ["taskset", "-c", ",".join(str(cpu) for cpu in sorted(cpus)), *argv]


class ServerProcess:
    """A running posenc-server. Started by the constructor, which returns once the server
    printed its ready line (so it accepts connections); `stop()` drains it with SIGTERM."""

    def __init__(self, argv: list[str], *, ready_timeout: float = 10.0, cpus: set[int] | None = None):
        self.argv = pinned(cpus, argv)
        self.process = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.ready_line = self._wait_ready(ready_timeout)
        # from here on its log goes on to ours: an unread pipe would fill and stall the server
        threading.Thread(target=_forward, args=(self.process.stderr, sys.stderr), daemon=True,
                         name=f"posenc-server-{self.process.pid}-stderr").start()
        fields = dict(part.split("=", 1) for part in self.ready_line.split()[2:])
        self.tcp_address = None if fields["tcp"] == "off" else fields["tcp"]
        self.unix_address = None if fields["unix"] == "off" else "unix:" + fields["unix"]
        self.threads = int(fields["threads"])

    def _wait_ready(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.process.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if ready:
                line = self.process.stdout.readline()
                if line.startswith("posenc-server ready "):
                    return line.strip()
                if not line:  # exited: its stderr says why
                    self.process.wait()
                    raise PosencError("server", f"posenc-server exited with status {self.process.returncode}: "
                                      f"{self.process.stderr.read().strip()}")
        self.process.kill()
        self.process.wait()
        raise PosencError("server", f"posenc-server did not become ready within {timeout} s")

    @property
    def address(self) -> str:
        """TCP if it listens on TCP, else the Unix socket."""
        return self.tcp_address or self.unix_address

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM (drain), wait up to `timeout`, SIGKILL if still there; the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process.stdout.close()
        return self.process.returncode

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _forward(source, sink) -> None:
    """Copy a child's stderr lines to ours until it closes (the child exited)."""
    with source:
        for line in source:
            sink.write(line)


def start_server(*, ready_timeout: float = 10.0, cpus: set[int] | None = None, **kwargs) -> ServerProcess:
    """Start a server with `server_argv(**kwargs)`; e.g. start_server(port=0, shm_dir=d)."""
    return ServerProcess(server_argv(**kwargs), ready_timeout=ready_timeout, cpus=cpus)
