"""`posenc serve`: build the tables once, run uvicorn workers over them, clean up on the way out.

The parent process imports the serving stack and warms the kernels, publishes every configured
table into shared memory, starts the sidecar processes, then runs uvicorn (uvloop, httptools
with connection guards). One worker serves in the parent itself; N workers are forks of the
warm parent (not uvicorn's spawned interpreters, which imported everything and loaded every
kernel again: seconds each), so each only attaches the tables before serving. SIGTERM or Ctrl-C
stops accepting, lets in-flight requests finish for up to `drain_timeout_s`, stops the
sidecars, removes the tables the workers created over HTTP and unlinks the configured ones. The
registry stays (REGISTRY_KEPT).
"""

from __future__ import annotations

import copy
import errno
import logging
import logging.config
import math
import multiprocessing
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import uvicorn
from uvicorn import _subprocess
from uvicorn.config import LOGGING_CONFIG
from uvicorn.supervisors.multiprocess import SIGNALS as SUPERVISOR_SIGNALS

from ...client.process import ServerProcess, service_argv
from ...config import ServiceConfig
from ...errors import PosencError
from ...shm import TableStore, attach
from ..app import STATE_ENV, serve_state
from ..transport.protocol import GuardedHttpToolsProtocol
from .ledger import cleanup_created_tables
from .service import freeze_startup_heap, make_run_dir
from .warmup import warm_kernels, warm_lookups

log = logging.getLogger("posenc.serve")


@dataclass(frozen=True)
class Sidecar:
    """A process run next to the HTTP workers for the service's lifetime."""

    name: str
    argv: tuple[str, ...]
    #: a posenc-server: wait for its ready line at start (and fail with its words if it exits)
    posenc_server: bool = False


#: Seconds a sidecar may take to print its ready line.
SIDECAR_READY_S = 30

#: Seconds a worker may take to answer the uvicorn supervisor's liveness ping.
WORKER_HEALTHCHECK_S = 60


def sidecars_for(config: ServiceConfig) -> list[Sidecar]:
    """The processes `posenc serve` supervises besides uvicorn: the native binary-protocol
    server when [server] binary_port or binary_socket is set (it serves the same shm tables)."""
    argv = service_argv(config)
    return [] if argv is None else [Sidecar("binary", tuple(argv), posenc_server=True)]


class Sidecars:
    """Start sidecars after the tables are published; stop them after HTTP has drained."""

    def __init__(self, sidecars: Sequence[Sidecar]):
        self.sidecars = list(sidecars)
        self.processes: list[subprocess.Popen] = []

    def start(self) -> None:
        """Start each and wait for its ready line: a sidecar that cannot serve (its port taken,
        a bad flag) stops `posenc serve` with its own words, before the HTTP side reports ready
        while another process answers on that port."""
        for sidecar in self.sidecars:
            log.info("starting sidecar %s: %s", sidecar.name, " ".join(sidecar.argv))
            if not sidecar.posenc_server:
                self.processes.append(subprocess.Popen(sidecar.argv))
                continue
            try:
                server = ServerProcess(list(sidecar.argv), ready_timeout=SIDECAR_READY_S)
            except PosencError as exc:
                raise PosencError(f"sidecar {sidecar.name}",
                                  f"the {sidecar.name} server did not start, so posenc serve stops: "
                                  f"{exc.message}") from None
            log.info("sidecar %s: %s", sidecar.name, server.ready_line)
            self.processes.append(server.process)

    def stop(self, timeout_s: float) -> None:
        """SIGTERM each, wait up to timeout_s in all, SIGKILL whatever is left."""
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
        deadline = time.monotonic() + timeout_s
        for sidecar, process in zip(self.sidecars, self.processes):
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("sidecar %s did not stop within %g s; killing it", sidecar.name, timeout_s)
                process.kill()
                process.wait()
        self.processes = []


class WarmForks:
    """Stands in for the multiprocessing context uvicorn's supervisor makes its workers with
    (`uvicorn._subprocess.spawn`, its one place for that): each worker is a fork of this warm
    process instead of a fresh interpreter. A spawned worker imported numpy, numba, ml_dtypes and
    the HTTP stack and loaded every kernel again (about 2 s of CPU each, all workers at once on a
    busy node); a fork starts with them loaded, sharing their pages copy-on-write. It does not get
    the parent's other threads: the kernel pool's (kernels/parallel.py forgets the pool in a child)."""

    _fork = multiprocessing.get_context("fork")

    def Process(self, target, kwargs):  # multiprocessing's name
        return self._fork.Process(target=_forked_worker, args=(target,), kwargs=kwargs)


def _forked_worker(start, **kwargs) -> None:
    """Give the worker the signal handlers a fresh interpreter has (the supervisor's would queue
    SIGTERM for a loop that never runs here), then run uvicorn's worker entry point."""
    for sig in SUPERVISOR_SIGNALS:
        signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
    start(**kwargs)


@contextmanager
def forked_workers():
    """uvicorn's worker processes are forks of this one while inside (see WarmForks). What is
    alive now is frozen first (gc.freeze, as the gc docs advise before fork): no worker's
    collections then touch, and so copy, the pages of the inherited heap."""
    freeze_startup_heap()
    spawn = getattr(_subprocess, "spawn", None)
    if spawn is None:  # a uvicorn that makes its workers elsewhere: they start as it spawns them (slower)
        log.warning("uvicorn has no _subprocess.spawn: workers start as fresh interpreters")
        yield
        return
    _subprocess.spawn = WarmForks()
    try:
        yield
    finally:
        _subprocess.spawn = spawn


def _log_config() -> dict:
    config = copy.deepcopy(LOGGING_CONFIG)
    config["loggers"]["posenc"] = {"handlers": ["default"], "level": "INFO", "propagate": False}
    return config


def publish_tables(store: TableStore, config: ServiceConfig) -> None:
    for table in config.tables:
        started = time.perf_counter()
        info = store.publish(table.name, table.spec)
        log.info("published table %s: %s x %s %s (%.1f MiB) in %.2f s", table.name, info.shape[0], info.shape[1],
                 info.dtype, info.nbytes / 2**20, time.perf_counter() - started)


def warm_gathers(config: ServiceConfig) -> None:
    """Run each published table's gather once here, in the parent: the workers, forked after this,
    inherit it compiled. Each worker warms its tables' gathers again before it reports ready (a
    millisecond then); with an empty numba cache (a new pod) every worker compiled them at once."""
    for table in config.tables:
        with attach(table.name, root=config.server.shm_dir, verify=False) as mapped:  # just written here
            warm_lookups([mapped])


#: Why a clean stop leaves posenc-registry in the shm directory (issue 39 asked): its counter is what
#: keeps generation numbers from repeating. Deleted, the next server's tables would start again at
#: generation 1, and a reader that outlived this server (a sidecar's app: deploy/k8s/overlays/example)
#: would take the new generation 1 for the one it holds, keep serving the unlinked old table and
#: hold its memory. Nothing else is left: every table this server published is unlinked.
REGISTRY_KEPT = ("the registry (posenc-registry, 128 KiB) stays: it numbers the next tables' generations, "
                 "so a reader that outlives this server sees that its table was replaced")

#: errno of a failed bind -> (the setting to change, what to do).
_LISTEN_ADVICE = {
    errno.EADDRINUSE: ("port", "another process listens there: stop it, or choose another port with --port"),
    errno.EACCES: ("port", "ports below 1024 need privileges: choose another with --port"),
}


def check_http_address(host: str, port: int) -> None:
    """Raise PosencError naming host:port when HTTP cannot listen there (taken by another process, an
    address not of this machine), before anything is built: uvicorn finds out only after the tables
    are published and the sidecar started, logs "[Errno 98] Address already in use" without the
    address and exits 3. Probes each address the host resolves to as uvicorn binds it (SO_REUSEADDR,
    IPv6 sockets IPv6-only), closing it at once; port 0 (any free port) needs no probe."""
    if port == 0:
        return
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise PosencError("host", f"cannot listen on {host!r}: {exc.strerror}") from None
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                where = f"[{address[0]}]:{port}" if family == socket.AF_INET6 else f"{address[0]}:{port}"
                field, advice = _LISTEN_ADVICE.get(exc.errno, ("host", "is it an address of this machine?"))
                message = f"HTTP cannot listen on {where}: {exc.strerror} ({advice})"
                raise PosencError(field, message) from None


def serve(config: ServiceConfig, sidecars: Sequence[Sidecar] | None = None) -> int:
    """Run the service in this process until SIGTERM/SIGINT; returns the exit status."""
    config.check_serveable()
    check_http_address(config.server.host, config.server.port)
    logging.config.dictConfig(_log_config())
    # SIGTERM behaves like Ctrl-C: uvicorn drains and returns; during setup it unwinds the finally below.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    run_dir = make_run_dir()
    os.environ[STATE_ENV] = serve_state(config, str(run_dir))
    supervisor = Sidecars(sidecars_for(config) if sidecars is None else sidecars)
    store = None
    try:
        started = time.perf_counter()
        warm_kernels()
        log.info("kernels warm in %.2f s", time.perf_counter() - started)
        store = TableStore(config.server.shm_dir)
        publish_tables(store, config)
        warm_gathers(config)
        supervisor.start()
        server = config.server
        with forked_workers():
            uvicorn.run("posenc.http.app:create_app", factory=True, host=server.host, port=server.port,
                        workers=server.worker_count, loop="uvloop", http=GuardedHttpToolsProtocol, lifespan="on",
                        timeout_keep_alive=max(1, round(server.keep_alive_s)),
                        timeout_graceful_shutdown=math.ceil(server.drain_timeout_s),
                        # A worker warms its kernels before serving: milliseconds as a fork of this process, but
                        # a spawned one (see forked_workers) loads them all, which on a busy node can hold the GIL
                        # past uvicorn's 5 s ping, and the supervisor would kill and restart a healthy worker.
                        timeout_worker_healthcheck=WORKER_HEALTHCHECK_S,
                        access_log=False,  # the app writes its own, with the request id (posenc.http.pipeline.asgi)
                        log_config=_log_config(), server_header=False)
    except KeyboardInterrupt:
        pass
    finally:
        supervisor.stop(config.server.drain_timeout_s)
        removed = cleanup_created_tables(run_dir, config.server.shm_dir)
        if store is not None:
            store.close()
        shutil.rmtree(run_dir, ignore_errors=True)
        log.info("stopped; removed %d configured and %d created tables; %s", len(config.tables), len(removed),
                 REGISTRY_KEPT)
    return 0
