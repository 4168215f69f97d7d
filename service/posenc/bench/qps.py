"""`posenc bench qps` (`make bench-qps`): the binary server against redis, in one run, with one
load generator for both.

posenc-load drives every server: posenc (on its io_uring loop where it has one, and on the epoll
loop, `--io`) with ENCODE_TABLE (one position of a 128-dim float32
table: a 512-byte row) and with PING carrying 512 bytes (a reply of the same size and no
encoding work: the protocol's own ceiling), redis with `GET key` of a 512-byte value in RESP
(`posenc-load --resp`). Same connections, same schedule, same histogram, so the rows compare.
Each server runs alone on the server CPU (one event-loop thread), the generator on the other:
  1. closed loop, 50 connections, 1 and 16 requests in flight per connection, over TCP and a
     Unix socket; with `perf` present, the server's CPU time and system calls per request are
     counted meanwhile (perf stat -p: task-clock, raw_syscalls:sys_enter, and cycles where the
     machine exposes hardware counters: virtual machines often do not);
  2. the tail race: open loop at constant offered rates (latency from each request's scheduled
     time, so queueing counts), half of posenc's saturation and half of redis's, P50/P99/P99.9
     of redis and posenc (also with --busy-poll-us) at each rate, over TCP and the Unix socket.
posenc-jitter, spinning on both CPUs right after the tail runs, says how much time the machine
itself takes away (interrupts, other tasks, the hypervisor): a P99 below those stalls cannot be met.
Each run also records how long the hypervisor took the server's CPU away (/proc/stat's steal), shown
beside the tail rows: a run with 100 ms of it has a P99 of tens of milliseconds whatever the server.
redis-server comes from the Debian package (`make bench-deps`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Self

from ..client.process import REPO_BINARY, pinned, start_server
from ..encodings import SinusoidalSpec
from ..errors import PosencError
from ..http.runtime.launch import free_port
from ..shm import TableStore
from ..tables import TableSpec
from .timing import cpu_ticks, machine_line, markdown_table

TABLE = "qps-sin128"
LOADGEN = REPO_BINARY.with_name("posenc-load")
JITTER = REPO_BINARY.with_name("posenc-jitter")
VALUE_BYTES = 512  # a 128-dim float32 row
REDIS_KEY = "key:posenc-bench"
#: posenc ENCODE_TABLE at the deep pipeline, by transport, and its least ratio to redis in the same run.
PIPELINED_TARGET = {"tcp": 1_200_000, "unix": 1_600_000}
REDIS_RATIO_TARGET = 1.5
P99_TARGET_US = 80.0
BUSY_POLL_US = 200
FIGURES = ("rps", "p50_us", "p99_us", "p999_us", "cpu_ns", "syscalls", "cycles", "stolen_ms")
#: Per-request counters: result key, format, the perf event it needs, column title.
COUNTER_TITLES = (("cpu_ns", ".0f", "task-clock", "server CPU ns/req"), ("cycles", ",.0f", "cycles", "cycles/req"),
                  ("syscalls", ".3f", "raw_syscalls:sys_enter", "syscalls/req"))
COUNTERS = tuple(entry[:3] for entry in COUNTER_TITLES)


def add_arguments(parser) -> None:
    parser.add_argument("--seconds", type=float, default=4.0, help="measured seconds per run (default %(default)s)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each row; medians are reported")
    parser.add_argument("--connections", type=int, default=50, help="connections (default %(default)s)")
    parser.add_argument("--pipeline", type=int, default=16, help="requests in flight per connection (default %(default)s)")
    parser.add_argument("--server-cpu", type=int, default=0, help="CPU for the servers (default %(default)s)")
    parser.add_argument("--client-cpu", type=int, default=1, help="CPU for the load generator (default %(default)s)")


def require_redis() -> None:
    if not shutil.which("redis-server"):
        raise PosencError("redis", "redis-server is missing: run `make bench-deps` (the Debian package redis-server)")


class Redis:
    """A throwaway redis-server (no persistence) on a TCP port and a Unix socket, holding REDIS_KEY
    with a 512-byte value."""

    def __init__(self, cpu: int, workdir: Path):
        self.port = free_port()
        self.unix_path = str(workdir / "redis.sock")
        self.process = subprocess.Popen(
            pinned({cpu}, ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--unixsocket",
                           self.unix_path, "--unixsocketperm", "700", "--save", "", "--appendonly", "no", "--dir",
                           str(workdir), "--daemonize", "no", "--loglevel", "warning"]),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        key, value = REDIS_KEY.encode(), os.urandom(VALUE_BYTES)
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

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


class Target:
    """One server as posenc-load reaches it: which process, which socket, which requests."""

    def __init__(self, label: str, pid: int, where: list[str], what: list[str]):
        self.label, self.pid, self.where, self.what = label, pid, where, what


def perf_events() -> list[str]:
    """The perf stat events this machine counts (none without perf)."""
    if not shutil.which("perf"):
        return []
    events = []
    for event in ("task-clock", "raw_syscalls:sys_enter", "cycles"):
        probe = subprocess.run(["perf", "stat", "-x,", "-e", event, "--", "true"], capture_output=True, text=True,
                               check=False)
        if probe.returncode == 0 and "<not supported>" not in probe.stderr and "<not counted>" not in probe.stderr:
            events.append(event)
    return events


def stolen_ms(cpu: int) -> float | None:
    """Milliseconds the hypervisor has run something else while `cpu` wanted to run (the steal
    column of /proc/stat), or None where there is no such count. On a VM a vCPU taken away stops
    the server it runs outright: the tail stalls of tens of milliseconds seen with busy polling were
    this (docs/server-io.md), so each run records how much of it happened to the server's CPU."""
    ticks = cpu_ticks({cpu}).get(cpu)
    return ticks[7] * 1000 / os.sysconf("SC_CLK_TCK") if ticks is not None and len(ticks) > 7 else None


class ServerCounters:
    """What a server process spent while a load ran (a `with` block around the load): perf stat's
    counters where perf counts them, and the time the hypervisor took its CPUs away. Its CPU time also
    comes from /proc/<pid>/stat (utime + stime, every thread), so a bench's CPU-per-request column is
    filled where perf is missing or not allowed, at clock-tick resolution (10 ms: fine over seconds)."""

    def __init__(self, pid: int, cpus: set[int], events: list[str]):
        self.pid, self.cpus, self.events = pid, cpus, events

    def __enter__(self) -> Self:
        self.stolen, self.cpu_ticks = self._stolen(), process_ticks(self.pid)
        self.perf = None
        if self.events:
            argv = ["perf", "stat", "-x,", "-e", ",".join(self.events), "-p", str(self.pid)]
            self.perf = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        return self

    def __exit__(self, *exc) -> None:
        self.counted = {}
        if self.perf is not None:
            self.perf.send_signal(signal.SIGINT)
            for line in self.perf.communicate(timeout=10)[1].splitlines():
                fields = line.split(",")
                if len(fields) > 2 and fields[0].replace(".", "", 1).isdigit():
                    self.counted[fields[2]] = float(fields[0])
        stolen, ticks = self._stolen(), process_ticks(self.pid)
        self.stolen = None if stolen is None or self.stolen is None else stolen - self.stolen
        self.cpu_ticks = None if ticks is None or self.cpu_ticks is None else ticks - self.cpu_ticks

    def _stolen(self) -> float | None:
        each = [stolen_ms(cpu) for cpu in self.cpus]
        return None if None in each else sum(each)

    def per_request(self, done: int) -> dict:
        """The figures over the run, per request of the `done` it completed: cpu_ns (perf's task-clock, else
        /proc's), syscalls and cycles (perf only: None without), and stolen_ms (the whole run's)."""
        counted, done = self.counted, max(done, 1)
        cpu_ns = counted["task-clock"] * 1e6 if "task-clock" in counted else None  # msec
        if cpu_ns is None and self.cpu_ticks is not None:
            cpu_ns = self.cpu_ticks * 1e9 / os.sysconf("SC_CLK_TCK")
        syscalls, cycles = counted.get("raw_syscalls:sys_enter"), counted.get("cycles")
        return {"cpu_ns": None if cpu_ns is None else cpu_ns / done,
                "syscalls": None if syscalls is None else syscalls / done,
                "cycles": None if cycles is None else cycles / done, "stolen_ms": self.stolen}


def process_ticks(pid: int) -> int | None:
    """CPU time a process has run, user and system, all its threads (clock ticks); None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()  # the name, in parentheses, may hold spaces
    except OSError:
        return None
    return int(fields[11]) + int(fields[12])


def measure(target: Target, cpu: int, server_cpu: int, events: list[str], *args: str) -> dict:
    """One posenc-load run against `target` (posenc-load on `cpu`), with the server's perf counters
    and the time its CPU (`server_cpu`) was stolen over the run."""
    with ServerCounters(target.pid, {server_cpu}, events) as counters:
        out = subprocess.run(pinned({cpu}, [str(LOADGEN), *target.where, *target.what, "--json", *args]),
                             capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise PosencError("posenc-load", f"{target.label}: " + (out.stderr.strip() or f"exited {out.returncode}"))
    report = json.loads(out.stdout)
    report.update(counters.per_request(report["completed"]))
    return report


def jitter(cpus, seconds: float) -> list[dict]:
    """posenc-jitter on each CPU at once: the stalls a spinning process sees there."""
    runs = [subprocess.Popen(pinned({cpu}, [str(JITTER), str(seconds)]), stdout=subprocess.PIPE, text=True)
            for cpu in cpus]
    return [json.loads(run.communicate()[0]) for run in runs]


def medians(runs: list[dict]) -> dict:
    """Each figure's median over the runs (None stays None), and the most stolen from one run."""
    found = {key: None if runs[0][key] is None else statistics.median(r[key] for r in runs)
             for key in FIGURES}
    found["stolen_ms_max"] = None if runs[0]["stolen_ms"] is None else max(r["stolen_ms"] for r in runs)
    return found


def run(args) -> str:
    if not all(path.exists() for path in (REPO_BINARY, LOADGEN, JITTER)):
        raise PosencError("bench", "native binaries missing: run `make native-server` first")
    if len(os.sched_getaffinity(0)) < 2 or args.server_cpu == args.client_cpu:
        raise PosencError("bench", "needs two CPUs, one for the servers and one for the load generator")
    require_redis()
    events = perf_events()
    samples: dict[tuple, list[dict]] = defaultdict(list)
    span = ["--seconds", str(args.seconds), "--warmup", "1", "--requests", str(10**9), "-c", str(args.connections)]
    client, server_cpus = args.client_cpu, {args.server_cpu}
    shm_parent = "/dev/shm" if Path("/dev/shm").is_dir() else None
    with tempfile.TemporaryDirectory(prefix="posenc-qps-", dir=shm_parent) as shm, \
            tempfile.TemporaryDirectory(prefix="posenc-qps-sock-") as sockets:
        store = TableStore(shm)
        try:
            store.publish(TABLE, TableSpec(SinusoidalSpec(128), 0, 131072))
            # every server stays up on the server CPU (idle ones cost nothing), so each run follows the
            # others within seconds and the machine's noise hits all alike
            with Redis(args.server_cpu, Path(sockets)) as redis, \
                    start_server(port=0, unix_path=f"{sockets}/posenc.sock", shm_dir=shm, threads=1,
                                 cpus=server_cpus) as plain, \
                    start_server(port=0, unix_path=f"{sockets}/epoll.sock", shm_dir=shm, threads=1,
                                 cpus=server_cpus, io="epoll") as epoll, \
                    start_server(port=0, unix_path=f"{sockets}/busy.sock", shm_dir=shm, threads=1, cpus=server_cpus,
                                 busy_poll_us=BUSY_POLL_US) as busy:
                targets = build_targets(redis, plain, epoll, busy)
                auto_loop = loop_of(plain)
                for _ in range(args.repeats):  # saturation: closed loop
                    for depth in (1, args.pipeline):
                        for key in CLOSED_LOOP:
                            for transport in ("tcp", "unix"):
                                if depth == 1 and transport == "unix":
                                    continue
                                samples[("closed", depth, transport, key)].append(measure(
                                    targets[transport][key], client, args.server_cpu, events, *span, "-P", str(depth)))
                saturation = {key: statistics.median(r["rps"] for r in samples[("closed", 1, "tcp", key)])
                              for key in ("redis", "posenc")}
                rates = {"half of posenc's saturation": saturation["posenc"] / 2,
                         "half of redis's saturation": saturation["redis"] / 2}
                for _ in range(args.repeats):  # the tail race: open loop at the same offered rates
                    for rate_name, rate in rates.items():
                        for transport in ("tcp", "unix"):
                            for key in ("redis", "posenc", "posenc-busy"):
                                samples[("open", rate_name, transport, key)].append(measure(
                                    targets[transport][key], client, args.server_cpu, [], *span, "--rate", f"{rate:.0f}"))
                stalls = jitter((args.server_cpu, client), seconds=args.seconds)
        finally:
            store.close()
    results = {key: medians(runs) for key, runs in samples.items()}
    return report(results, rates, stalls, events, args, auto_loop)


def build_targets(redis: Redis, plain, epoll, busy) -> dict[str, dict[str, Target]]:
    table, ping, get = ["--table", TABLE], ["--ping", str(VALUE_BYTES)], ["--resp", "--key", REDIS_KEY]
    tcp = {"redis": Target("redis", redis.pid, ["--port", str(redis.port)], get),
           "posenc": Target("posenc", plain.pid, ["--port", port_of(plain)], table),
           "posenc-epoll": Target("posenc epoll", epoll.pid, ["--port", port_of(epoll)], table),
           "ping": Target("posenc PING", plain.pid, ["--port", port_of(plain)], ping),
           "posenc-busy": Target("posenc busy-poll", busy.pid, ["--port", port_of(busy)], table)}
    unix = {"redis": Target("redis", redis.pid, ["--unix", redis.unix_path], get),
            "posenc": Target("posenc", plain.pid, ["--unix", socket_path(plain)], table),
            "posenc-epoll": Target("posenc epoll", epoll.pid, ["--unix", socket_path(epoll)], table),
            "ping": Target("posenc PING", plain.pid, ["--unix", socket_path(plain)], ping),
            "posenc-busy": Target("posenc busy-poll", busy.pid, ["--unix", socket_path(busy)], table)}
    return {"tcp": tcp, "unix": unix}


def port_of(server) -> str:
    return server.tcp_address.rpartition(":")[2]


def socket_path(server) -> str:
    return server.unix_address.removeprefix("unix:")


def loop_of(server) -> str:
    """The event loop a server runs, from its ready line (io=uring or io=epoll)."""
    return dict(part.split("=", 1) for part in server.ready_line.split()[2:])["io"]


#: The closed-loop rows, in table order.
CLOSED_LOOP = ("redis", "posenc", "posenc-epoll", "ping")
LABELS = {"redis": "redis GET, 512 B value", "posenc": "posenc ENCODE_TABLE, 1 position, 128-d float32",
          "posenc-epoll": "posenc ENCODE_TABLE, 1 position, 128-d float32, --io epoll",
          "ping": "posenc PING, 512 B echoed (protocol ceiling)",
          "posenc-busy": f"posenc ENCODE_TABLE, --busy-poll-us {BUSY_POLL_US}"}


def _num(value, fmt: str) -> str:
    return "" if value is None else format(value, fmt)


def verdict(ok: bool) -> str:
    return "met" if ok else "missed"


def throughput_table(results: dict, events: list[str], args) -> str:
    rows = []
    for depth in (1, args.pipeline):
        for transport in ("tcp", "unix"):
            if depth == 1 and transport == "unix":
                continue
            redis = results[("closed", depth, transport, "redis")]
            for key in CLOSED_LOOP:
                r = results[("closed", depth, transport, key)]
                target = ""
                if key == "posenc" and depth == args.pipeline:
                    floor, ratio = PIPELINED_TARGET[transport], r["rps"] / redis["rps"]
                    target = (f">= {floor / 1e6:.1f} M req/s: {verdict(r['rps'] >= floor)}; "
                              f">= {REDIS_RATIO_TARGET:.1f}x redis: {verdict(ratio >= REDIS_RATIO_TARGET)}")
                first = key == "redis"
                counters = [_num(r[k], f) for k, f, event in COUNTERS if event in events]
                rows.append([f"{transport.upper()}, {args.connections} conns, pipeline {depth}" if first else "",
                             LABELS[key], f"{r['rps']:,.0f}", _num(r["p50_us"], ".1f"), _num(r["p99_us"], ".1f"),
                             _num(r["p999_us"], ".1f"), *counters, f"{r['rps'] / redis['rps']:.2f}x", target])
    headers = ["load", "server", "req/s", "P50 us", "P99 us", "P99.9 us",
               *(title for _, _, event, title in COUNTER_TITLES if event in events), "vs redis", "target"]
    return markdown_table(headers, rows)


def tail_table(results: dict, rates: dict) -> str:
    rows = []
    for rate_name, rate in rates.items():
        for transport in ("tcp", "unix"):
            redis = results[("open", rate_name, transport, "redis")]
            for key in ("redis", "posenc", "posenc-busy"):
                r = results[("open", rate_name, transport, key)]
                target = ""
                if key != "redis":
                    target = (f"P99 <= redis: {verdict(r['p99_us'] <= redis['p99_us'])}; "
                              f"P99 < {P99_TARGET_US:.0f} us: {verdict(r['p99_us'] < P99_TARGET_US)}")
                first = key == "redis"
                stolen = "-" if r["stolen_ms"] is None else f"{r['stolen_ms']:.0f} / {r['stolen_ms_max']:.0f}"
                rows.append([f"{rate:,.0f} req/s ({rate_name}), {transport.upper()}" if first else "", LABELS[key],
                             f"{r['p50_us']:.1f}", f"{r['p99_us']:.1f}", f"{r['p999_us']:.1f}",
                             f"{r['p99_us'] / redis['p99_us']:.2f}x", stolen, target])
    headers = ["offered rate (open loop)", "server", "P50 us", "P99 us", "P99.9 us", "P99 vs redis",
               "server CPU stolen ms (median / most)", "target"]
    return markdown_table(headers, rows)


def report(results: dict, rates: dict, stalls: list[dict], events: list[str], args, auto_loop: str) -> str:
    counted = ("server CPU time and system calls per request from `perf stat -p` over each run ("
               + ", ".join(events) + ")" if events else "no perf: no per-request counters")
    if events and "cycles" not in events:
        counted += "; no hardware cycle counter on this machine, so CPU time stands in for cycles"
    jitter_line = "; ".join(
        f"CPU {cpu}: {j['lost_percent']:.2f}% of the time in {j['stalls_over_50us']} stalls > 50 us, "
        f"{j['stalls_over_500us']} > 500 us, longest {j['max_stall_us']:,.0f} us"
        for cpu, j in zip((args.server_cpu, args.client_cpu), stalls))
    return (f"{throughput_table(results, events, args)}\n\n{tail_table(results, rates)}\n\n"
            f"Medians of {args.repeats} runs of {args.seconds:g} s (after 1 s warm-up), every server and load "
            f"alternating; posenc's default loop (--io auto) is {auto_loop} here; "
            f"servers on CPU {args.server_cpu} (one thread), posenc-load (loadtest/native, --resp "
            f"for redis) on CPU {args.client_cpu}; {counted}. Machine: {machine_line()}. Stalls a spinning "
            f"process saw right after the tail runs (posenc-jitter, {args.seconds:g} s on each CPU at once): "
            f"{jitter_line}. redis {redis_version()}.")


def redis_version() -> str:
    out = subprocess.run(["redis-server", "--version"], capture_output=True, text=True, check=False).stdout
    return next((part.split("=", 1)[1] for part in out.split() if part.startswith("v=")), "?")
