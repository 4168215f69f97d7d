"""`posenc bench qps` (`make bench-qps`): the binary server against redis, in one run.

Each server runs alone on CPU 0 (one event-loop thread), each load generator on CPU 1:
  1. 50 connections, no pipelining: redis-benchmark GET of a 512-byte value vs posenc-load
     ENCODE_TABLE of one position of a 128-dim float32 table (a 512-byte row);
  2. the same with 16 requests in flight per connection (redis-benchmark -P 16);
  3. posenc at half the saturation rate of (1), offered open-loop at a constant rate, so the
     P99 includes any queueing (closed-loop generators hide it); once as run above, once with
     --busy-poll-us (the event loop polls instead of sleeping between requests: on a VM, waking
     a halted vCPU costs tens of microseconds per request).
posenc-jitter, spinning on both CPUs meanwhile, says how much time the machine itself takes
away (interrupts, other tasks, the hypervisor): a P99 target below those stalls cannot be met.
redis-server comes from the Debian package; it is installed with apt-get when missing.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Self

from ..client.process import REPO_BINARY, pinned, start_server
from ..errors import PosencError
from ..http.launch import free_port
from ..shm import TableStore
from ..encodings import SinusoidalSpec
from ..tables import TableSpec
from .timing import machine_line, markdown_table

TABLE = "qps-sin128"
LOADGEN = REPO_BINARY.with_name("posenc-load")
JITTER = REPO_BINARY.with_name("posenc-jitter")
VALUE_BYTES = 512  # a 128-dim float32 row
SINGLE_TARGET_RATIO = 1.0
PIPELINED_TARGET = 1_000_000
P99_TARGET_US = 80.0
BUSY_POLL_US = 200


def add_arguments(parser) -> None:
    parser.add_argument("--seconds", type=float, default=4.0, help="measured seconds per run (default %(default)s)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each row; medians are reported")
    parser.add_argument("--connections", type=int, default=50, help="connections (default %(default)s)")
    parser.add_argument("--pipeline", type=int, default=16, help="pipeline depth of run 2 (default %(default)s)")
    parser.add_argument("--server-cpu", type=int, default=0, help="CPU for the servers (default %(default)s)")
    parser.add_argument("--client-cpu", type=int, default=1, help="CPU for the load generators (default %(default)s)")


def ensure_redis() -> None:
    if shutil.which("redis-server") and shutil.which("redis-benchmark"):
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise PosencError("redis", "redis-server / redis-benchmark are missing; install the Debian package "
                          "redis-server (apt-get install redis-server redis-tools)")
    print("installing redis-server with apt-get ...", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", "redis-server", "redis-tools"], check=True, env=env)


class Redis:
    """A throwaway redis-server (no persistence) holding redis-benchmark's GET key with a 512-byte value."""

    def __init__(self, cpu: int, workdir: Path):
        self.port = free_port()
        self.process = subprocess.Popen(
            pinned({cpu}, ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                           "--appendonly", "no", "--dir", str(workdir), "--daemonize", "no", "--loglevel", "warning"]),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        value = os.urandom(VALUE_BYTES)
        key = b"key:__rand_int__"  # what `redis-benchmark -t get` reads when -r is not given
        command = b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(key), key, len(value), value)
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
                    s.sendall(command)
                    if s.recv(16).startswith(b"+OK"):
                        return
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise PosencError("redis", "redis-server did not start") from None
                time.sleep(0.05)

    def benchmark(self, cpu: int, connections: int, pipeline: int, requests: int) -> dict:
        out = subprocess.run(pinned({cpu}, ["redis-benchmark", "-p", str(self.port), "-t", "get", "-d",
                                            str(VALUE_BYTES), "-c", str(connections), "-P", str(pipeline), "-n",
                                            str(requests), "--csv"]),
                             capture_output=True, text=True, check=True).stdout
        line = next(r for r in csv.DictReader(io.StringIO(out)) if r["test"] == "GET")
        return {"rps": float(line["rps"]), "p50_us": 1000 * float(line["p50_latency_ms"]),
                "p95_us": 1000 * float(line["p95_latency_ms"]), "p99_us": 1000 * float(line["p99_latency_ms"]),
                "p999_us": None}

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def posenc_load(cpu: int, port: str, *args: str) -> dict:
    out = subprocess.run(pinned({cpu}, [str(LOADGEN), "--port", port, "--table", TABLE, "--json", *args]),
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise PosencError("posenc-load", out.stderr.strip() or f"exited with {out.returncode}")
    return json.loads(out.stdout)


def run(args) -> str:
    if not all(path.exists() for path in (REPO_BINARY, LOADGEN, JITTER)):
        raise PosencError("bench", "native binaries missing: run `make native-server` first")
    if len(os.sched_getaffinity(0)) < 2 or args.server_cpu == args.client_cpu:
        raise PosencError("bench", "needs two CPUs, one for the servers and one for the load generators")
    ensure_redis()
    samples: dict[str, list[dict]] = defaultdict(list)
    span = ["--seconds", str(args.seconds), "--warmup", "1", "--requests", str(10**9), "-c", str(args.connections)]
    client, server_cpus = args.client_cpu, {args.server_cpu}
    shm_parent = "/dev/shm" if Path("/dev/shm").is_dir() else None
    with tempfile.TemporaryDirectory(prefix="posenc-qps-", dir=shm_parent) as shm, \
            tempfile.TemporaryDirectory(prefix="posenc-redis-") as redis_dir:
        store = TableStore(shm)
        try:
            store.publish(TABLE, TableSpec(SinusoidalSpec(128), 0, 131072))
            # all servers stay up on the server CPU (idle ones cost nothing), so each posenc run
            # follows its redis run within seconds: the machine's noise hits both alike
            with Redis(args.server_cpu, Path(redis_dir)) as redis, \
                    start_server(port=0, shm_dir=shm, threads=1, cpus=server_cpus) as plain, \
                    start_server(port=0, shm_dir=shm, threads=1, cpus=server_cpus, busy_poll_us=BUSY_POLL_US) as busy:
                for _ in range(args.repeats):
                    for depth, key in ((1, "1"), (args.pipeline, "P")):
                        # redis-benchmark is bounded by a count: size it to last about `seconds`
                        last = samples[f"redis-{key}"][-1]["rps"] if samples[f"redis-{key}"] else 60_000 * depth
                        requests = int(last * args.seconds)
                        samples[f"redis-{key}"].append(redis.benchmark(client, args.connections, depth, requests))
                        samples[f"posenc-{key}"].append(posenc_load(client, port_of(plain), *span, "-P", str(depth)))
                rate = f"{statistics.median(r['rps'] for r in samples['posenc-1']) / 2:.0f}"
                stalls = jitter((args.server_cpu, client), seconds=args.seconds)
                for _ in range(args.repeats):
                    samples["posenc-open"].append(posenc_load(client, port_of(plain), *span, "--rate", rate))
                    samples["posenc-open-busy"].append(posenc_load(client, port_of(busy), *span, "--rate", rate))
        finally:
            store.close()
    return report({key: medians(runs) for key, runs in samples.items()}, stalls, args)


def jitter(cpus, seconds: float) -> list[dict]:
    """posenc-jitter on each CPU at once: the stalls a spinning process sees there."""
    runs = [subprocess.Popen(pinned({cpu}, [str(JITTER), str(seconds)]), stdout=subprocess.PIPE, text=True)
            for cpu in cpus]
    return [json.loads(run.communicate()[0]) for run in runs]


def port_of(server) -> str:
    return server.tcp_address.rpartition(":")[2]


def medians(runs: list[dict]) -> dict:
    """Each figure's median over the runs (None stays None)."""
    return {key: None if runs[0][key] is None else statistics.median(r[key] for r in runs)
            for key in ("rps", "p50_us", "p95_us", "p99_us", "p999_us")} | {"rate": runs[0].get("rate")}


POSENC_ROW = "posenc 1 position, 128-d float32"


def row(load: str, server: str, r: dict, versus: str = "", target: str = "") -> list[str]:
    latencies = [_us(r[key]) for key in ("p50_us", "p95_us", "p99_us", "p999_us")]
    return [load, server, f"{r['rps']:,.0f}", *latencies, versus, target]


def _us(value) -> str:
    return "" if value is None else f"{value:.1f}"


def verdict(ok: bool) -> str:
    return "met" if ok else "missed"


def report(results: dict, stalls: list[dict], args) -> str:
    r1, p1, rp, pp = results["redis-1"], results["posenc-1"], results["redis-P"], results["posenc-P"]
    po, pb = results["posenc-open"], results["posenc-open-busy"]
    single, pipelined = p1["rps"] / r1["rps"], pp["rps"] / rp["rps"]
    p99_target = f"P99 < {P99_TARGET_US:.0f} us: "
    rows = [
        row(f"{args.connections} conns, no pipelining", "redis GET 512 B", r1, "1.00x"),
        row("", POSENC_ROW, p1, f"{single:.2f}x",
            f">= {SINGLE_TARGET_RATIO:.1f}x redis: {verdict(single >= SINGLE_TARGET_RATIO)}"),
        row(f"{args.connections} conns, pipeline {args.pipeline}", "redis GET 512 B", rp, "1.00x"),
        row("", POSENC_ROW, pp, f"{pipelined:.2f}x",
            f">= {PIPELINED_TARGET:,} req/s: {verdict(pp['rps'] >= PIPELINED_TARGET)}"),
        row(f"open loop, {po['rate']:,.0f} req/s (half of saturation)", POSENC_ROW, po, "",
            p99_target + verdict(po["p99_us"] < P99_TARGET_US)),
        row("", f"{POSENC_ROW}, --busy-poll-us {BUSY_POLL_US}", pb, "", p99_target + verdict(pb["p99_us"] < P99_TARGET_US)),
    ]
    headers = ["load", "server", "req/s", "P50 us", "P95 us", "P99 us", "P99.9 us", "vs redis", "target"]
    table = markdown_table(headers, rows)
    return (f"{table}\n\nMedians of {args.repeats} runs of {args.seconds:g} s (after 1 s warm-up), redis and posenc "
            f"runs alternating; servers on CPU {args.server_cpu} (one thread), load generators on CPU "
            f"{args.client_cpu}. Machine: {machine_line()}. Stalls a spinning process saw meanwhile (posenc-jitter, "
            f"{args.seconds:g} s on each CPU at once): "
            + "; ".join(f"CPU {cpu}: {j['lost_percent']:.2f}% of the time in {j['stalls_over_50us']} stalls > 50 us, "
                        f"{j['stalls_over_500us']} > 500 us, longest {j['max_stall_us']:,.0f} us"
                        for cpu, j in zip((args.server_cpu, args.client_cpu), stalls))
            + ". "
            f"redis {redis_version()}, redis-benchmark; posenc-load (loadtest/native).")


def redis_version() -> str:
    out = subprocess.run(["redis-server", "--version"], capture_output=True, text=True, check=False).stdout
    return next((part.split("=", 1)[1] for part in out.split() if part.startswith("v=")), "?")
