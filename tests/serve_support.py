"""A real `posenc serve` for the tests that talk to it over sockets (server, client, fuzz,
hostile, browser): started on a free port with a private shared-memory directory, stopped and
cleaned up after the module."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from posenc.http.runtime.launch import ServerProcess


@contextmanager
def served(config: Callable[[str], str], *, env: dict | None = None, prefix: str = "posenc-test-",
           clean_exit: bool = False) -> Iterator[ServerProcess]:
    """The running server of `config(shm_dir)` (a TOML text; POSENC_SHM_DIR names the directory
    too, for a config that does not), its `shm_dir` set. `clean_exit`:
    the test fails unless SIGTERM stops it with status 0 (its log in the message) and it left no
    table segment behind."""
    shm_dir = tempfile.mkdtemp(prefix=prefix, dir="/dev/shm")
    process = ServerProcess(config(shm_dir), env={"POSENC_SHM_DIR": shm_dir, **(env or {})}).start()
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
