"""posenc's service for the tests: a real `posenc serve` for those that talk to it over sockets
(server, client, fuzz, hostile, browser), started on a free port, and the app in process behind
FastAPI's TestClient; each with a private shared-memory directory, removed after."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from fastapi.testclient import TestClient
from posenc.config import ServiceConfig
from posenc.http import create_app
from posenc.http.runtime.launch import ServerProcess


@contextmanager
def served(config: Callable[[str], str], *, env: dict | None = None, prefix: str = "posenc-test-",
           clean_exit: bool = False, args: tuple[str, ...] = ()) -> Iterator[ServerProcess]:
    """The running server of `config(shm_dir)` (a TOML text; POSENC_SHM_DIR names the directory
    too, for a config that does not), given further `posenc serve` flags `args`, its `shm_dir` set.
    `clean_exit`: the test fails unless SIGTERM stops it with status 0 (its log in the message) and
    it left no table segment behind."""
    shm_dir = tempfile.mkdtemp(prefix=prefix, dir="/dev/shm")
    env = {"POSENC_SHM_DIR": shm_dir, **(env or {})}
    process = ServerProcess(config(shm_dir), env=env, args=args).start()
    process.shm_dir = shm_dir
    try:
        yield process
    finally:
        status = process.stop()
        left = sorted(f for f in os.listdir(shm_dir) if f.startswith("posenc."))
        shutil.rmtree(shm_dir, ignore_errors=True)
    if clean_exit:
        assert status == 0, process.log()
        assert left == [], f"segments left after a clean exit: {left}"


@contextmanager
def app_client(prefix: str = "posenc-app-") -> Iterator[TestClient]:
    """posenc's app in this process (FastAPI's TestClient, its lifespan run) on the default
    config with a private shared-memory directory, removed after."""
    root = tempfile.mkdtemp(prefix=prefix, dir="/dev/shm")
    try:
        with TestClient(create_app(ServiceConfig.from_dict({"server": {"shm_dir": root}}))) as client:
            yield client
    finally:
        shutil.rmtree(root, ignore_errors=True)
