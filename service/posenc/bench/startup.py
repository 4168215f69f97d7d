"""`posenc bench startup`: how long `posenc serve` takes from exec to a 200 from /readyz.

Each run starts `posenc serve` (the embedded config unless --config; its own free HTTP and
binary ports and a private shm directory) and timestamps, from just before the exec: its log
lines as they arrive (the parent's "kernels warm", the last "published table", uvicorn's
"Uvicorn running" = the socket listens) and the first 200 from /readyz, polled every few
milliseconds (what a load balancer or a kubelet waits for). It also reads the CPU time the
process tree (the parent, its workers, the binary sidecar) had spent at that moment from
/proc, which a busy machine's other processes do not inflate as they do the wall clock. A
first run, untimed, fills the caches (bytecode; numba's compiled kernels where it runs): the
figure wanted is a start once installed, as a restarted pod or unit gets it. So the servers run without
PYTHONDONTWRITEBYTECODE: under it a source checkout (an editable install, `make run`'s) compiles
every posenc module again on every start (~0.15 s here), where an installed wheel has its
bytecode from pip and the Docker image reads it.
"""

from __future__ import annotations

import http.client
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..cli.options import add_flag
from ..errors import PosencError
from ..http.runtime.launch import free_port
from .timing import machine_line, markdown_table

#: Log lines that mark a phase (the first arrival of each counts, except "published table": the last).
PHASES = {"kernels warm": "kernels warm (first log line)", "published table": "tables published",
          "Uvicorn running": "listening", "Application startup complete": "a worker started"}
POLL_S = 0.005


def add_arguments(parser) -> None:
    add_flag(parser, "--repeats", old=("--runs",), type=int, default=5,
             help="timed starts; medians are reported (default %(default)s)")
    parser.add_argument("--config", type=Path, help="the service's TOML config to serve (default: the embedded one)")
    parser.add_argument("--workers", type=int, help="override the config's worker processes (0 = one per core)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds a start may take (default %(default)s)")


@dataclass
class Start:
    """One start: seconds from the exec to each phase, and the tree's CPU seconds at readiness."""

    phases: dict[str, float] = field(default_factory=dict)
    ready_s: float = 0.0
    cpu_s: float = 0.0
    log: list[str] = field(default_factory=list)


def serve_argv(config: Path | None, workers: int | None, port: int, binary_port: int, shm_dir: str) -> list[str]:
    argv = [sys.executable, "-m", "posenc.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
            "--binary-port", str(binary_port), "--shm-dir", shm_dir]
    if config is not None:
        argv += ["--config", str(config)]
    if workers is not None:
        argv += ["--workers", str(workers)]
    return argv


def ready(port: int) -> bool:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1.0)
    try:
        connection.request("GET", "/readyz")
        return connection.getresponse().status == 200
    except OSError:
        return False
    finally:
        connection.close()


def tree_cpu_seconds(root: int) -> float:
    """User + system CPU seconds of `root` and its live descendants (from /proc/PID/stat)."""
    parents, cpu = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rpartition(")")[2].split()  # after "pid (comm)": state, ppid, ...
        except OSError:  # exited while listed
            continue
        pid = int(entry)
        parents[pid] = int(fields[1])
        cpu[pid] = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent and pid not in tree]
        tree.update(children)
        frontier += children
    return sum(cpu.get(pid, 0) for pid in tree) / os.sysconf("SC_CLK_TCK")


def start_once(config: Path | None, workers: int | None, timeout_s: float,
               at_ready: Callable[[int], None] | None = None) -> Start:
    """One timed start, stopped (SIGTERM) once ready; `at_ready(port)` runs first while it serves."""
    start = Start()
    with tempfile.TemporaryDirectory(prefix="posenc-startup-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None) \
            as shm_dir:
        port = free_port()
        argv = serve_argv(config, workers, port, free_port(), shm_dir)
        t0 = time.perf_counter()
        env = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)

        def read_log() -> None:
            for line in process.stdout:
                at = time.perf_counter() - t0
                start.log.append(f"{at:7.3f} {line.rstrip()}")
                for marker, phase in PHASES.items():
                    if marker in line and (phase not in start.phases or marker == "published table"):
                        start.phases[phase] = at

        reader = threading.Thread(target=read_log, daemon=True)
        reader.start()
        try:
            while not ready(port):
                if process.poll() is not None:
                    reader.join(5)
                    raise PosencError("bench", f"posenc serve exited with {process.returncode}:\n"
                                      + "\n".join(start.log[-20:]))
                if time.perf_counter() - t0 > timeout_s:
                    raise PosencError("bench", f"posenc serve not ready within {timeout_s:g} s:\n"
                                      + "\n".join(start.log[-20:]))
                time.sleep(POLL_S)
            start.ready_s = time.perf_counter() - t0
            start.cpu_s = tree_cpu_seconds(process.pid)
            if at_ready is not None:
                at_ready(port)
        finally:
            process.terminate()
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            reader.join(5)
    return start


def run(args) -> str:
    load_before = os.getloadavg()[0]
    first = start_once(args.config, args.workers, args.timeout)
    starts = [start_once(args.config, args.workers, args.timeout) for _ in range(args.repeats)]
    load_after = os.getloadavg()[0]
    rows = []
    for phase in PHASES.values():
        seen = [s.phases[phase] for s in starts if phase in s.phases]
        if seen:
            rows.append([phase, f"{statistics.median(seen):.3f}", f"{min(seen):.3f}-{max(seen):.3f}"])
    ready_s = [s.ready_s for s in starts]
    cpu_s = [s.cpu_s for s in starts]
    rows.append(["**/readyz 200**", f"**{statistics.median(ready_s):.3f}**", f"{min(ready_s):.3f}-{max(ready_s):.3f}"])
    rows.append(["CPU seconds of the process tree at ready", f"{statistics.median(cpu_s):.3f}",
                 f"{min(cpu_s):.3f}-{max(cpu_s):.3f}"])
    text = markdown_table(["phase (seconds from exec)", "median", "range"], rows)
    config = args.config or "the embedded config"
    workers = "the config's workers" if args.workers is None else f"--workers {args.workers}"
    return (f"{text}\n\n`posenc serve` with {config} ({workers}; {os.cpu_count()} CPUs here), each start on fresh "
            f"ports and a private shm directory; median of {args.repeats} starts after one that filled the caches "
            f"(the bytecode, and numba's where it runs; that one: /readyz 200 after {first.ready_s:.3f} s). "
            f"Load average {load_before:.1f} before, {load_after:.1f} after. Machine: {machine_line()}.\n")
