"""Helpers for the binary-protocol tests (tests/test_binary_*.py): building the native binaries,
a table store with a few published tables, a running server, and a raw-socket connection for
frames the client library would never send.

PYTEST_DONT_REWRITE"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Self

import numpy as np
import posenc
import pytest
from conftest import hf_config
from posenc.client import Client, start_server
from posenc.client.protocol import HEADER_SIZE, ServerError, parse_header, reply_from, request_frame
from posenc.errors import PosencError
from posenc.shm import TableStore
from posenc.tables import TableSpec

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "native" / "build"

#: The tables every server fixture serves: float32 and float64, a negative start, an odd t2t width.
TABLES = {
    "sin128": TableSpec(posenc.SinusoidalSpec(128), 0, 4096),
    "llama3.1": TableSpec(posenc.RopeSpec.from_hf_config(hf_config("llama-3.1-8b")), 0, 2048, dtype="float64"),
    "t2t-33": TableSpec(posenc.SinusoidalSpec(33, layout="t2t"), -100, 100),
}


@functools.cache
def build() -> Path:
    """Build (or bring up to date) posenc-server and posenc-load; the directory holding them."""
    for directory in ("native/server", "loadtest/native"):
        subprocess.run(["make", "-s", "-C", str(ROOT / directory)], check=True)
    return BUILD


@contextlib.contextmanager
def table_store(tables=TABLES):
    """A private shm directory (on /dev/shm when present) with `tables` published."""
    root = Path(tempfile.mkdtemp(prefix="posenc-binary-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    store = TableStore(root)
    try:
        for name, table in tables.items():
            store.publish(name, table)
        yield store, root
    finally:
        store.close()
        shutil.rmtree(root, ignore_errors=True)


#: The event loops the binary-server test modules run on: a module that uses the `server_io` fixture
#: (`pytestmark = pytest.mark.usefixtures("server_io")`) runs once per loop. POSENC_TEST_IO=uring or epoll runs one of them.
IO_LOOPS = tuple(os.environ.get("POSENC_TEST_IO", "uring,epoll").split(","))
#: The loop running_server starts with (`server_io` sets it; None: the server's default, --io auto).
CURRENT_IO = {"loop": None}


@functools.cache
def uring_refusal() -> str | None:
    """Why posenc-server cannot run its io_uring loop here (a build without liburing, a kernel that
    refuses io_uring), or None when it can."""
    build()
    try:
        with start_server(port=0, threads=1, io="uring"):
            return None
    except PosencError as exc:
        return str(exc)


@contextlib.contextmanager
def running_server(shm_dir, **kwargs):
    """A server on a free TCP port and a Unix socket, stopped (drained) afterwards; on the loop of the
    `server_io` run unless `io` is given."""
    build()
    sock_dir = Path(tempfile.mkdtemp(prefix="posenc-sock-"))
    kwargs.setdefault("threads", 2)
    if CURRENT_IO["loop"]:
        kwargs.setdefault("io", CURRENT_IO["loop"])
    server = start_server(port=0, unix_path=str(sock_dir / "binary.sock"), shm_dir=str(shm_dir), **kwargs)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(sock_dir, ignore_errors=True)


# --- fixtures the test modules import by name -------------------------------------------------

@pytest.fixture(scope="module", params=IO_LOOPS)
def server_io(request):
    """The event loop this run of the module's servers use ("uring" or "epoll"); skips the uring
    run where the server cannot use io_uring."""
    if request.param == "uring" and (why := uring_refusal()):
        pytest.skip(f"no io_uring loop here: {why}")
    CURRENT_IO["loop"] = request.param
    yield request.param
    CURRENT_IO["loop"] = None


@pytest.fixture(scope="module")
def store_and_root(server_io):
    """(TableStore, its directory) with TABLES published, for one test module's run on one loop
    (tests publish and replace tables: each run starts from TABLES)."""
    with table_store() as pair:
        yield pair


@pytest.fixture(scope="module")
def tables(store_and_root):
    """The directory of store_and_root."""
    return store_and_root[1]


@pytest.fixture(scope="module")
def server(tables, server_io):
    """A two-thread server over `tables` for one test module, on the loop of the `server_io` run."""
    with running_server(tables) as srv:
        yield srv


@pytest.fixture(scope="module")
def sin128_rows(tables):
    """All 4096 rows of sin128, as the server returns them."""
    with running_server(tables, threads=1) as srv, Client(srv.address) as c:
        return c.encode("sin128", np.arange(4096))


def frame(opcode, request_id=1, **fields) -> bytes:
    return request_frame(opcode, request_id, **fields)


def positions_bytes(values, dtype="<i8") -> bytes:
    return np.asarray(values, dtype=dtype).tobytes()


class Raw:
    """A bare socket speaking frames: send anything, read replies one at a time."""

    def __init__(self, address: str, timeout: float = 10.0):
        host, _, port = address.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _read(self, n: int) -> bytes | None:
        chunks, got = [], 0
        while got < n:
            chunk = self.sock.recv(n - got)
            if not chunk:
                return None
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def raw_reply(self):
        """(header fields as parse_header gives them, payload bytes), or None at EOF."""
        header = self._read(HEADER_SIZE)
        if header is None:
            return None
        fields = parse_header(header)
        payload = self._read(fields[0] - HEADER_SIZE)
        assert payload is not None, "the server closed the connection inside a reply"
        return fields, payload

    def reply(self):
        """(request_id, Reply or ServerError), or None at EOF."""
        got = self.raw_reply()
        if got is None:
            return None
        fields, payload = got
        try:
            return fields[4], reply_from(fields, payload)
        except ServerError as exc:
            return fields[4], exc

    def error(self, status) -> ServerError:
        """The next reply, which must be an error with this status."""
        got = self.reply()
        assert got is not None, f"expected a {status!r} error frame, got EOF"
        assert isinstance(got[1], ServerError), f"expected a {status!r} error, got {got[1]}"
        assert got[1].status == status, (got[1].status, str(got[1]))
        return got[1]

    def closed(self) -> bool:
        """True once the server has closed its side (EOF), after any pending replies."""
        return self._read(1) is None

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
