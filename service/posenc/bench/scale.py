"""`posenc bench scale`: how throughput grows with the cores a server is given.

Binary protocol: for N = 1, 2, ... server threads, posenc-server runs pinned to N CPUs and the
load comes from the other CPUs: one posenc-load process per load CPU, pinned, each with its share
of the connections (ENCODE_TABLE of one 128-dim float32 row, pipelined, the `bench qps` request).
The N-thread rate is the sum over the load processes; efficiency(N) = rate(N) / (N * rate(1)).
A row is only meaningful while the load CPUs can outrun the server: the report also gives the
load processes' rate against a PING-only server on the same CPUs (the generator's own ceiling
at that N), and marks rows where the server is not the bottleneck.

HTTP: the same for `posenc serve --workers N` pinned to N CPUs, under wrk on the other CPUs (one
thread a load CPU; the `bench http` single-row request, answered by posenc's own protocol). How
busy the server's and the load's CPUs were (from /proc/stat, the kernel's network work included)
says which side set the rate: the server while its CPUs were saturated.

N goes as far as leaves at least as many load CPUs as server CPUs (on 2 CPUs: N = 1; on 16: up
to 8).
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from ..client.process import REPO_BINARY, pinned, start_server
from ..encodings import SinusoidalSpec
from ..errors import PosencError
from ..http.runtime.launch import free_port
from ..shm import TableStore
from ..tables import TableSpec
from .http import ensure_wrk
from .http_cases import CASES, request_headers, service_config
from .startup import ready, serve_argv
from .timing import cpu_ticks, machine_line, markdown_table

TABLE = "scale-sin128"
LOADGEN = REPO_BINARY.with_name("posenc-load")
EFFICIENCY_TARGET = 0.85
PARTS = ("binary", "http")
#: The HTTP request: one 128-dim float32 row of a table, octet-stream (`bench http`'s row-binary).
HTTP_CASE = "row-binary"
#: CPUs busier than this were saturated: the server's set the rate, else the load's did if they were.
SATURATED = 0.9
SHM_PARENT = "/dev/shm" if Path("/dev/shm").is_dir() else None


def add_arguments(parser) -> None:
    parser.add_argument("--seconds", type=float, default=3.0, help="measured seconds per run (default %(default)s)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per N; medians are reported (default %(default)s)")
    parser.add_argument("--connections", type=int, default=64,
                        help="connections per server thread, spread over the load processes (default %(default)s)")
    parser.add_argument("--pipeline", type=int, default=16, help="requests in flight per connection (default %(default)s)")
    parser.add_argument("--max-threads", type=int, default=0,
                        help="largest N (default: as many as leave as many CPUs for the load)")
    parser.add_argument("--parts", default=",".join(PARTS),
                        help="what to scale: binary (posenc-server threads), http (posenc serve workers); "
                        "default %(default)s")


def load(cpus: list[int], port: str, what: list[str], connections: int, args) -> float:
    """requests/s of one posenc-load per CPU in `cpus`, run at once, summed."""
    per = max(1, connections // len(cpus))
    span = ["--seconds", str(args.seconds), "--warmup", "1", "--requests", str(10**10), "-c", str(per),
            "-P", str(args.pipeline), "--json"]
    runs = [subprocess.Popen(pinned({cpu}, [str(LOADGEN), "--port", port, *what, *span]), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for cpu in cpus]
    total = 0.0
    for run in runs:
        out, err = run.communicate(timeout=args.seconds + 60)
        if run.returncode != 0:
            raise PosencError("posenc-load", err.strip() or f"exited {run.returncode}")
        total += json.loads(out)["rps"]
    return total


def run(args) -> str:
    parts = [part.strip() for part in args.parts.split(",") if part.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown or not parts:
        raise PosencError("parts", f"must name some of {', '.join(PARTS)}, got {args.parts!r}")
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise PosencError("bench", "needs at least two CPUs (one for the server, one for the load)")
    largest = len(cpus) // 2
    if args.max_threads:
        largest = min(largest, args.max_threads)
    reports = [binary_report(args, cpus, largest)] if "binary" in parts else []
    if "http" in parts:
        reports.append(http_report(args, cpus, largest))
    return "\n".join(reports)


def binary_report(args, cpus: list[int], largest: int) -> str:
    if not (REPO_BINARY.exists() and LOADGEN.exists()):
        raise PosencError("bench", "native binaries missing: run `make native-server` first")
    rows, base = [], None
    with tempfile.TemporaryDirectory(prefix="posenc-scale-", dir=SHM_PARENT) as shm:
        store = TableStore(shm)
        try:
            store.publish(TABLE, TableSpec(SinusoidalSpec(128), 0, 131072))
            for n in range(1, largest + 1):
                server_cpus, load_cpus = cpus[:n], cpus[n:]
                with start_server(port=0, shm_dir=shm, threads=n, cpus=set(server_cpus)) as server:
                    port = server.tcp_address.rpartition(":")[2]
                    connections = args.connections * n
                    rates = [load(load_cpus, port, ["--table", TABLE], connections, args) for _ in range(args.repeats)]
                    ceiling = load(load_cpus, port, ["--ping", "16"], connections, args)
                rate = statistics.median(rates)
                base = base or rate
                efficiency = rate / (n * base)
                bound = "server" if rate < 0.9 * ceiling else "load generator (add load CPUs)"
                rows.append([str(n), str(len(load_cpus)), f"{rate:,.0f}", f"{min(rates):,.0f}-{max(rates):,.0f}",
                             f"{efficiency:.2f}", f"{ceiling:,.0f}", bound])
        finally:
            store.close()
    table = markdown_table(["server threads N", "load CPUs", "req/s (median)", "range", "efficiency",
                            "PING req/s, same load", "bottleneck"], rows)
    return (f"{table}\n\nposenc-server (`--threads N`, pinned to CPUs 0..N-1) under posenc-load (one process per "
            f"remaining CPU, {args.connections} connections per server thread, pipeline {args.pipeline}, "
            f"ENCODE_TABLE of one 128-dim float32 row), TCP on 127.0.0.1, median of {args.repeats} runs of "
            f"{args.seconds:g} s. Efficiency = req/s(N) / (N x req/s(1)); target >= {EFFICIENCY_TARGET}. "
            f"Machine: {machine_line()}.\n")


def http_report(args, cpus: list[int], largest: int) -> str:
    wrk = ensure_wrk()
    case = CASES[HTTP_CASE]
    seconds = max(1, round(args.seconds))  # wrk takes whole seconds
    rows, base = [], None
    with tempfile.TemporaryDirectory(prefix="posenc-scale-http-", dir=SHM_PARENT) as work:
        shm = Path(work, "shm")
        shm.mkdir()
        config = Path(work, "posenc.toml")
        config.write_text(service_config(str(shm)))
        script = Path(work, "request.lua")
        headers = request_headers(HTTP_CASE, case)
        script.write_text("".join(f'wrk.headers["{k}"] = "{v}"\n' for k, v in headers.items()))
        for n in range(1, largest + 1):
            server_cpus, load_cpus = cpus[:n], cpus[n:]
            port = free_port()
            with served_http(config, shm, port, n, set(server_cpus), Path(work, f"serve-{n}.log")):
                argv = pinned(set(load_cpus), [wrk, f"-t{len(load_cpus)}", f"-c{args.connections * n}",
                                               f"-d{seconds}s", "--timeout", "10s", "-s", str(script),
                                               f"http://127.0.0.1:{port}{case.path}"])
                runs = [wrk_run(argv, server_cpus, load_cpus) for _ in range(args.repeats)]
            rates = [rate for rate, _, _ in runs]
            rate = statistics.median(rates)
            server_busy = statistics.median(busy for _, busy, _ in runs)
            load_busy = statistics.median(busy for _, _, busy in runs)
            base = base or rate
            bound = "server" if server_busy > SATURATED else \
                "load generator (add load CPUs)" if load_busy > SATURATED else "neither saturated"
            rows.append([str(n), str(len(load_cpus)), f"{rate:,.0f}", f"{min(rates):,.0f}-{max(rates):,.0f}",
                         f"{rate / (n * base):.2f}", f"{server_busy:.0%}", f"{load_busy:.0%}", bound])
    table = markdown_table(["HTTP workers N", "load CPUs", "req/s (median)", "range", "efficiency",
                            "server CPUs busy", "load CPUs busy", "bottleneck"], rows)
    return (f"{table}\n\n`posenc serve --workers N` (pinned to CPUs 0..N-1; one 131072 x 128 float32 table) "
            f"under wrk (one thread a remaining CPU, {args.connections} connections per worker, keep-alive, "
            f"one request in flight a connection): {case.label}, GET {case.path}, on 127.0.0.1; median of "
            f"{args.repeats} runs of {seconds} s. Efficiency = req/s(N) / (N x req/s(1)); target >= "
            f"{EFFICIENCY_TARGET}. CPUs busy: /proc/stat over the run, the kernel's loopback work included "
            f"(on whichever CPU it ran); the server set the rate where its CPUs were over {SATURATED:.0%} "
            f"busy. Machine: {machine_line()}.\n")


class served_http:
    """`posenc serve --workers N` pinned to `cpus`, ready on `port` inside the block, stopped after."""

    def __init__(self, config: Path, shm: Path, port: int, workers: int, cpus: set[int], log: Path):
        self.argv = pinned(cpus, serve_argv(config, workers, port, 0, str(shm)))  # no binary port
        self.port, self.log = port, log

    def __enter__(self):
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while not ready(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.__exit__()
                raise PosencError("bench", f"posenc serve --workers did not become ready:\n"
                                  f"{self.log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def wrk_run(argv: list[str], server_cpus: list[int], load_cpus: list[int]) -> tuple[float, float, float]:
    """(requests/s, how busy the server's and the load's CPUs were: 0..1) of one wrk run; refuses a
    run with errors."""
    before = cpu_times(server_cpus + load_cpus)
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=600).stdout
    after = cpu_times(server_cpus + load_cpus)
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)|Socket errors: (.*)", out)
    if errors:
        raise PosencError("bench", f"wrk saw errors: {errors.group(0)}")

    def busy(cpus: list[int]) -> float:
        return statistics.mean((after[c][0] - before[c][0]) / max(after[c][1] - before[c][1], 1)
                               for c in cpus)

    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)), busy(server_cpus), busy(load_cpus)


def cpu_times(cpus: list[int]) -> dict[int, tuple[int, int]]:
    """{cpu: (busy ticks, all ticks)} from /proc/stat (busy: all but idle and iowait)."""
    return {cpu: (sum(ticks) - ticks[3] - ticks[4], sum(ticks)) for cpu, ticks in cpu_ticks(cpus).items()}
