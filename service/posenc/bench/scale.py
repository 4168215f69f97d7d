"""`posenc bench scale`: how the binary server's throughput grows with its threads.

For N = 1, 2, ... server threads, posenc-server runs pinned to N CPUs and the load comes from
the other CPUs: one posenc-load process per load CPU, pinned, each with its share of the
connections (ENCODE_TABLE of one 128-dim float32 row, pipelined, the `bench qps` request). The
N-thread rate is the sum over the load processes; efficiency(N) = rate(N) / (N * rate(1)).
A row is only meaningful while the load CPUs can outrun the server: the report also gives the
load processes' rate against a PING-only server on the same CPUs (the generator's own ceiling
at that N), and marks rows where the server is not the bottleneck. N goes as far as leaves at
least as many load CPUs as server CPUs (on 2 CPUs: N = 1; on 16: up to 8).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

from ..client.process import REPO_BINARY, pinned, start_server
from ..encodings import SinusoidalSpec
from ..errors import PosencError
from ..shm import TableStore
from ..tables import TableSpec
from .timing import machine_line, markdown_table

TABLE = "scale-sin128"
LOADGEN = REPO_BINARY.with_name("posenc-load")
EFFICIENCY_TARGET = 0.85


def add_arguments(parser) -> None:
    parser.add_argument("--seconds", type=float, default=3.0, help="measured seconds per run (default %(default)s)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per N; medians are reported (default %(default)s)")
    parser.add_argument("--connections", type=int, default=64,
                        help="connections per server thread, spread over the load processes (default %(default)s)")
    parser.add_argument("--pipeline", type=int, default=16, help="requests in flight per connection (default %(default)s)")
    parser.add_argument("--max-threads", type=int, default=0,
                        help="largest N (default: as many as leave as many CPUs for the load)")


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
    if not (REPO_BINARY.exists() and LOADGEN.exists()):
        raise PosencError("bench", "native binaries missing: run `make native-server` first")
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise PosencError("bench", "needs at least two CPUs (one for the server, one for the load)")
    largest = len(cpus) // 2
    if args.max_threads:
        largest = min(largest, args.max_threads)
    rows, base = [], None
    shm_parent = "/dev/shm" if Path("/dev/shm").is_dir() else None
    with tempfile.TemporaryDirectory(prefix="posenc-scale-", dir=shm_parent) as shm:
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
