"""Run `posenc serve` as a child process on a free port and wait until it is ready.

Shared by the real-server tests, the locust SLO runner and `posenc bench http`, which all
need a real server (separate process, real sockets) rather than an in-process app.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """`posenc serve --config <toml>` on 127.0.0.1:<free port>, optionally pinned with taskset."""

    def __init__(self, config_toml: str, *, cpus: str | None = None, env: dict[str, str] | None = None,
                 args: tuple[str, ...] = ()):
        self.dir = Path(tempfile.mkdtemp(prefix="posenc-server-"))
        self.config_path = self.dir / "posenc.toml"
        self.config_path.write_text(config_toml)
        self.log_path = self.dir / "server.log"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.cpus = cpus
        self.env = {**os.environ, **(env or {})}
        #: further `posenc serve` flags, e.g. ("--max-abs-position", "1e13")
        self.args = tuple(args)
        self.process: subprocess.Popen | None = None

    def start(self, ready_timeout_s: float = 60.0) -> ServerProcess:
        argv = [sys.executable, "-m", "posenc.cli", "serve", "--config", str(self.config_path),
                "--host", "127.0.0.1", "--port", str(self.port), *self.args]
        if self.cpus is not None:
            argv = ["taskset", "-c", self.cpus] + argv
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=self.env)
        self.wait_ready(ready_timeout_s)
        return self

    def wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"posenc serve exited with {self.process.returncode}:\n{self.log()}")
            try:
                with urllib.request.urlopen(f"{self.url}/readyz", timeout=1) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"posenc serve not ready within {timeout_s} s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, timeout_s: float = 30.0) -> int:
        """SIGTERM and wait; SIGKILL if it does not exit in time. Returns the exit status."""
        if self.process is None:
            return 0
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
