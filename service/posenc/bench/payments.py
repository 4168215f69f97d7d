"""`posenc bench payments`: the binary server called the way its headline user calls it.

A payment risk-control service (Java, Go) wants a 128-dim float32 encoding of every transaction,
the position being the transaction's id or millisecond timestamp (~1.7e12), at 1M+ req/s with a
P99 under 80 us. `bench qps` measures one generator with positions inside a stored table; this
suite measures that user's calls instead:

  * a connection pool, not one client: several posenc-load processes (default 4) hold the
    connections between them, e.g. 256 connections with one request each in flight, or 64 with 4,
    all pinned to the load CPU(s), the server alone on its own;
  * random millisecond timestamps in [1.7e12, 1.8e12) as positions (`posenc-load --positions`,
    each process with its own `--seed`), int64;
  * in the same run, each way to get such a row: ENCODE_SPEC with the inline 128-d sinusoid
    (the spec travels in every request), and ENCODE_TABLE on a named computed table over
    [0, 2^53) (rows computed for any position, no spec on the wire); beside them two anchors: the
    ENCODE_TABLE of a stored 128-d float32 table (positions inside it: the copying path's speed)
    and redis's GET of a 512-byte precomputed value (what the user would otherwise deploy).

Each operation's saturation is measured closed loop first (per pool, TCP and the Unix socket);
then open loop at 50, 80 and 95 % of it, over the first pool's connections, with latency from each
request's scheduled time (queueing counts): P50, P99, P99.9 from the processes' histograms merged
(`posenc-load --histogram`), never an average of percentiles. Every run records the server's CPU
time per request (perf's task-clock, else /proc/<pid>/stat), the time the hypervisor took its CPUs
away (/proc/stat's steal) and how busy the server's and the load's CPUs were (which side set a
closed-loop rate); after each open-loop run posenc-jitter says how long a spinning process was
stalled on either side, so a P99 that the machine itself breaks is seen as such.

posenc-server runs with `--max-abs-position 2^53` (the spec's positions are timestamps) and
`--threads N` for each N of `--server-threads` that leaves a load CPU (N server CPUs, the rest for
the load; a 2-CPU machine fits N = 1 only, and says so).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from contextlib import nullcontext
from pathlib import Path

from ..client.process import REPO_BINARY, pinned, start_server
from ..encodings import SinusoidalSpec
from ..errors import PosencError
from ..limits import MAX_EXACT_POSITION
from ..shm import TableStore
from ..tables import TableSpec
from .qps import (
    JITTER,
    LOADGEN,
    REDIS_KEY,
    Redis,
    ServerCounters,
    Target,
    jitter,
    medians,
    perf_events,
    port_of,
    socket_path,
)
from .scale import cpu_times
from .timing import machine_line, markdown_table

STORED, COMPUTED = "payments-sin128", "payments-sin128-any"
STORED_ROWS = 131072  # 64 MiB of float32 rows: more than the caches hold, as a real table would be
#: Millisecond timestamps of 2023-11 .. 2027-01: the positions a transaction keyed by time has.
POSITIONS = (1_700_000_000_000, 1_800_000_000_000)
OPS = ("spec", "computed", "stored", "redis")
LABELS = {"spec": "ENCODE_SPEC, inline 128-d sinusoid, timestamp positions",
          "computed": "ENCODE_TABLE, named computed table [0, 2^53), timestamp positions",
          "stored": "anchor: ENCODE_TABLE, stored 128-d float32 table, positions inside it",
          "redis": "anchor: redis GET, 512 B precomputed value"}
FRACTIONS = (0.5, 0.8, 0.95)
TRANSPORTS = ("tcp", "unix")
P99_TARGET_US = 80.0
RATE_TARGET = 1_000_000
#: CPUs busier than this over a closed-loop run were saturated: that side set the rate.
SATURATED = 0.9
#: posenc-jitter's seconds after each open-loop run, by --quick.
JITTER_SECONDS = {False: 1.0, True: 0.1}
#: How the open-loop processes, sharing the load CPU, wait for their next send: spinning, each would hold
#: the CPU for a scheduler slice while the others' requests fell due (P50 4.4 ms at 4 x 50 k req/s here);
#: sleeping, each would wait for a halted vCPU to wake (P50 0.39 ms); yielding whenever nothing arrived,
#: they take turns (P50 0.05 ms; one process alone: 0.013 ms).
OPEN_LOOP = ["--yield"]
OPEN_LOOP_TEXT = "each process spinning but yielding the CPU whenever nothing arrived (`--yield`)"


def add_arguments(parser) -> None:
    parser.add_argument("--seconds", type=float, default=2.0,
                        help="measured seconds per run (default %(default)s)")
    parser.add_argument("--warmup", type=float, default=1.0,
                        help="seconds before measuring (default %(default)s)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="runs of each row; medians are reported (default %(default)s)")
    parser.add_argument("--processes", type=int, default=4,
                        help="posenc-load processes sharing each pool's connections (default %(default)s)")
    parser.add_argument("--pools", default="256x1,64x4",
                        help="connection pools for the closed loop, CONNECTIONSxPIPELINE, comma-separated; "
                        "the open loop uses the first one's connections (default %(default)s)")
    parser.add_argument("--server-threads", default="1",
                        help="posenc-server --threads values to measure, comma-separated; each N takes N "
                        "CPUs and needs one more for the load (default %(default)s)")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run (0.3 s a point, one repeat): for tests, not for figures")


def pools_of(text: str) -> list[tuple[int, int]]:
    try:
        pools = [tuple(int(n) for n in part.split("x")) for part in text.split(",")]
    except ValueError:
        pools = []
    if not pools or any(len(p) != 2 or min(p) < 1 for p in pools):
        raise PosencError("pools", f"must be CONNECTIONSxPIPELINE[,...], e.g. 256x1,64x4; got {text!r}")
    return pools


def threads_of(text: str) -> list[int]:
    try:
        threads = [int(n) for n in text.split(",")]
    except ValueError:
        threads = []
    if not threads or min(threads) < 1:
        raise PosencError("server_threads", f"must be thread counts, e.g. 1,2,4,8; got {text!r}")
    return threads


def progress(line: str) -> None:
    """A progress line on stderr (stdout carries the markdown)."""
    print(f"bench payments: {line}", file=sys.stderr, flush=True)


def merge(reports: list[dict]) -> dict:
    """One report for posenc-load processes that ran at once: rates and counts summed, percentiles
    from their histograms merged (each bucket's top, clipped to the largest value, as posenc-load's)."""
    counts: dict[int, int] = defaultdict(int)
    for report in reports:
        for top, count in report["histogram"]:
            counts[top] += count
    total, largest = sum(counts.values()), max(r["max_us"] for r in reports) * 1e3

    def percentile(percent: float) -> float:
        target, seen = max(1, int(percent / 100 * total + 0.999999)), 0
        for top in sorted(counts):
            seen += counts[top]
            if seen >= target:
                return min(top, largest) / 1e3
        return largest / 1e3

    merged = {key: sum(r[key] for r in reports) for key in ("rps", "completed", "requests", "errors", "lost")}
    merged.update(p50_us=percentile(50), p99_us=percentile(99), p999_us=percentile(99.9))
    return merged


def split(total: int, parts: int) -> list[int]:
    """`total` as `parts` near-equal shares (the first ones larger), none 0."""
    return [n for n in (total // parts + (k < total % parts) for k in range(parts)) if n]


def measure_pool(target: Target, cpus: dict, events: list[str], args, connections: int, *load: str,
                 rate: float = 0) -> dict:
    """One run of `args.processes` posenc-load processes sharing `connections` (and, open loop,
    `rate`) against `target`, all pinned to the load CPUs: the merged report, the server's
    counters, and how busy the server's and the load's CPUs were."""
    span = ["--seconds", str(args.seconds), "--warmup", str(args.warmup), "--requests", str(10**10), "--json",
            "--histogram", *load]
    argvs = []
    for k, share in enumerate(split(connections, args.processes)):
        paced = ["--rate", f"{rate * share / connections:.0f}", *OPEN_LOOP] if rate else []
        argvs.append(pinned(set(cpus["load"]), [str(LOADGEN), *target.where, *target.what, *span,
                                                "-c", str(share), "--seed", str(k + 1), *paced]))
    before = cpu_times(cpus["server"] + cpus["load"])
    with ServerCounters(target.pid, set(cpus["server"]), events) as counters:
        runs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for argv in argvs]
        outs = [run.communicate(timeout=args.seconds + args.warmup + 60) for run in runs]
    after = cpu_times(cpus["server"] + cpus["load"])
    for run, (out, err) in zip(runs, outs):
        # exit 1 with a report: some requests failed or were still in flight when the run ended
        # (a loaded machine), which the report counts and the tables show as errors; not a failed run
        if run.returncode not in (0, 1) or not out.strip():
            why = err.strip() or f"exited {run.returncode}"
            raise PosencError("posenc-load", f"{target.label}: {why}")
    report = merge([json.loads(out) for out, _ in outs])
    report.update(counters.per_request(report["completed"]))
    for side in ("server", "load"):
        report[f"{side}_busy"] = statistics.mean(
            (after[c][0] - before[c][0]) / max(after[c][1] - before[c][1], 1) for c in cpus[side])
    return report


def run(args) -> str:
    if not all(path.exists() for path in (REPO_BINARY, LOADGEN, JITTER)):
        raise PosencError("bench", "native binaries missing: run `make native-server` first")
    if args.quick:
        args.seconds, args.warmup, args.repeats = 0.3, 0.1, 1
    pools, cpus = pools_of(args.pools), sorted(os.sched_getaffinity(0))
    wanted = threads_of(args.server_threads)
    fits, skipped = [n for n in wanted if n < len(cpus)], [n for n in wanted if n >= len(cpus)]
    if skipped:
        progress(skip_line(skipped, len(cpus)))
    if not fits:
        raise PosencError("server_threads", f"none of {args.server_threads} fits {len(cpus)} CPUs")
    ops = [op for op in OPS if op != "redis" or shutil.which("redis-server")]
    if "redis" not in ops:
        progress(NO_REDIS)
    events = perf_events()
    results = {}
    shm_parent = "/dev/shm" if Path("/dev/shm").is_dir() else None
    with tempfile.TemporaryDirectory(prefix="posenc-payments-", dir=shm_parent) as shm, \
            tempfile.TemporaryDirectory(prefix="posenc-payments-sock-") as sockets:
        store = TableStore(shm)
        try:
            store.publish(STORED, TableSpec(SinusoidalSpec(128), 0, STORED_ROWS))
            store.publish(COMPUTED, TableSpec(SinusoidalSpec(128), 0, MAX_EXACT_POSITION, computed=True))
            for n in fits:
                layout = {"server": cpus[:n], "load": cpus[n:]}
                progress(f"server threads {n}: server on CPUs {layout['server']}, {args.processes} "
                         f"posenc-load processes on CPUs {layout['load']}")
                results[n] = measure_threads(args, layout, ops, pools, events, shm, Path(sockets))
        finally:
            store.close()
    return report(results, ops, pools, events, args, skipped, len(cpus))


NO_REDIS = "redis-server is missing (`make bench-deps`): no redis rows"


def skip_line(skipped: list[int], n_cpus: int) -> str:
    return (f"server threads {', '.join(map(str, skipped))} skipped: this machine has {n_cpus} usable CPUs, "
            f"and N server threads take N CPUs and leave at least one for the load")


def targets_of(server, redis: Redis | None) -> dict[str, dict[str, Target]]:
    """{transport: {op: Target}}: how posenc-load reaches each operation (no redis op without redis)."""
    positions = ["--positions", "{}:{}".format(*POSITIONS)]
    targets = {}
    for transport in TRANSPORTS:
        where = ["--port", port_of(server)] if transport == "tcp" else ["--unix", socket_path(server)]
        targets[transport] = {
            "spec": Target(LABELS["spec"], server.pid, where, ["--spec-dim", "128", *positions]),
            "computed": Target(LABELS["computed"], server.pid, where, ["--table", COMPUTED, *positions]),
            "stored": Target(LABELS["stored"], server.pid, where, ["--table", STORED])}
        if redis is not None:
            where = ["--port", str(redis.port)] if transport == "tcp" else ["--unix", redis.unix_path]
            targets[transport]["redis"] = Target(LABELS["redis"], redis.pid, where,
                                                 ["--resp", "--key", REDIS_KEY])
    return targets


def measure_threads(args, cpus: dict, ops: list[str], pools, events: list[str], shm: str,
                    sockets: Path) -> dict:
    """Every row for one server thread count: closed-loop saturation, then the open-loop rates."""
    samples: dict[tuple, list[dict]] = defaultdict(list)
    with start_server(port=0, unix_path=str(sockets / "posenc.sock"), shm_dir=shm,
                      threads=len(cpus["server"]), cpus=set(cpus["server"]),
                      max_abs_position=MAX_EXACT_POSITION) as server, \
            (Redis(cpus["server"][0], sockets) if "redis" in ops else nullcontext()) as redis:
        targets = targets_of(server, redis)
        for repeat in range(args.repeats):
            for connections, depth in pools:
                for transport in TRANSPORTS:
                    for op in ops:
                        r = measure_pool(targets[transport][op], cpus, events, args, connections,
                                         "-P", str(depth))
                        samples[("closed", connections, depth, transport, op)].append(r)
                        progress(f"run {repeat + 1}/{args.repeats} closed loop {connections}x{depth} "
                                 f"{transport} {op}: {r['rps']:,.0f} req/s")
        (connections, depth), every = pools[0], cpus["server"] + cpus["load"]
        saturation = {(transport, op): statistics.median(
            r["rps"] for r in samples[("closed", connections, depth, transport, op)])
            for transport in TRANSPORTS for op in ops}
        for repeat in range(args.repeats):
            for fraction in FRACTIONS:
                for transport in TRANSPORTS:
                    for op in ops:
                        rate = fraction * saturation[(transport, op)]
                        r = measure_pool(targets[transport][op], cpus, [], args, connections, rate=rate)
                        stalls = dict(zip(every, jitter(every, JITTER_SECONDS[args.quick])))
                        r["stalls"] = {side: [stalls[cpu] for cpu in cpus[side]]
                                       for side in ("server", "load")}
                        samples[("open", fraction, transport, op)].append(r)
                        progress(f"run {repeat + 1}/{args.repeats} open loop {fraction:.0%} of {transport} "
                                 f"{op}'s saturation ({rate:,.0f} req/s): P99 {r['p99_us']:,.1f} us")
    return {"saturation": saturation,
            "rows": {key: {**medians(runs), **summary(runs)} for key, runs in samples.items()}}


def summary(runs: list[dict]) -> dict:
    """The figures of a row that qps's `medians` does not take: busy CPUs (medians), errors (all of
    them) and, open loop, the stalls posenc-jitter saw after the runs (the longest, the median lost %)."""
    found = {key: statistics.median(r[key] for r in runs) for key in ("server_busy", "load_busy")}
    found["errors"] = sum(r["errors"] + r["lost"] for r in runs)
    if "stalls" in runs[0]:
        for side in ("server", "load"):
            found[f"{side}_stall_us"] = max(j["max_stall_us"] for r in runs for j in r["stalls"][side])
            found[f"{side}_lost_percent"] = statistics.median(
                max(j["lost_percent"] for j in r["stalls"][side]) for r in runs)
    return found


def _num(value, fmt: str) -> str:
    return "" if value is None else format(value, fmt)


def _stolen(r: dict) -> str:
    return "-" if r["stolen_ms"] is None else f"{r['stolen_ms']:.0f} / {r['stolen_ms_max']:.0f}"


def closed_table(results: dict, ops: list[str], pools, events: list[str]) -> str:
    syscalls = "raw_syscalls:sys_enter" in events
    rows = []
    for n, found in results.items():
        for connections, depth in pools:
            for transport in TRANSPORTS:
                for op in ops:
                    r = found["rows"][("closed", connections, depth, transport, op)]
                    bound = ("server" if r["server_busy"] > SATURATED else
                             "load" if r["load_busy"] > SATURATED else "neither")
                    rows.append([str(n), transport.upper(), f"{connections} x {depth}", LABELS[op],
                                 f"{r['rps']:,.0f}", f"{r['p50_us']:.1f}", f"{r['p99_us']:.1f}",
                                 f"{r['p999_us']:.1f}", _num(r["cpu_ns"], ",.0f"),
                                 *([_num(r["syscalls"], ".2f")] if syscalls else []),
                                 f"{r['server_busy']:.0%} / {r['load_busy']:.0%} ({bound})", _stolen(r),
                                 str(r["errors"])])
    headers = ["server threads", "transport", "pool: conns x pipeline", "operation", "req/s (closed loop)",
               "P50 us", "P99 us", "P99.9 us", "server CPU ns/req", *(["syscalls/req"] if syscalls else []),
               "CPU busy server / load (saturated)", "server CPU stolen ms (median / most)", "errors"]
    return markdown_table(headers, rows)


def open_table(results: dict, ops: list[str]) -> str:
    rows = []
    for n, found in results.items():
        for fraction in FRACTIONS:
            for transport in TRANSPORTS:
                for op in ops:
                    r = found["rows"][("open", fraction, transport, op)]
                    offered = fraction * found["saturation"][(transport, op)]
                    rows.append([str(n), transport.upper(), f"{fraction:.0%}", LABELS[op], f"{offered:,.0f}",
                                 f"{r['rps']:,.0f}", f"{r['p50_us']:.1f}", f"{r['p99_us']:.1f}",
                                 f"{r['p999_us']:.1f}", "met" if r["p99_us"] < P99_TARGET_US else "missed",
                                 _num(r["cpu_ns"], ",.0f"), _stolen(r),
                                 f"{r['server_lost_percent']:.2f}% / {r['server_stall_us']:,.0f}",
                                 f"{r['load_lost_percent']:.2f}% / {r['load_stall_us']:,.0f}",
                                 str(r["errors"])])
    headers = ["server threads", "transport", "of saturation", "operation", "offered req/s (open loop)",
               "achieved req/s", "P50 us", "P99 us", "P99.9 us", f"P99 < {P99_TARGET_US:.0f} us",
               "server CPU ns/req", "server CPU stolen ms (median / most)",
               "stalled after the run, server CPU: lost / longest us", "load CPU: lost / longest us",
               "errors"]
    return markdown_table(headers, rows)


def report(results: dict, ops: list[str], pools, events: list[str], args, skipped: list[int],
           n_cpus: int) -> str:
    cpu = ("closed loop: `perf stat -p` task-clock" if "task-clock" in events
           else "closed loop: /proc/<pid>/stat utime + stime (perf does not count here)")
    best = {op: max(found["rows"][key]["rps"] for found in results.values() for key in found["rows"]
                    if key[0] == "closed" and key[-1] == op) for op in ops}
    notes = [f"Server threads measured: {', '.join(map(str, results))}"
             + (f"; {skip_line(skipped, n_cpus)}" if skipped else ""),
             f"Best closed-loop rate against the user's {RATE_TARGET / 1e6:.0f}M req/s: "
             + "; ".join(f"{op} {rate:,.0f} ({'met' if rate >= RATE_TARGET else 'missed'})"
                         for op, rate in best.items())]
    if "redis" not in ops:
        notes.append(NO_REDIS)
    pool_text = ", ".join(f"{c} connections x pipeline {d}" for c, d in pools)
    tables = f"{closed_table(results, ops, pools, events)}\n\n{open_table(results, ops)}"
    return (f"{tables}\n\n{'. '.join(notes)}.\n\n"
            f"Medians of {args.repeats} runs of {args.seconds:g} s (after {args.warmup:g} s warm-up) per "
            f"row{' (--quick: a smoke run, not figures)' if args.quick else ''}; every run has "
            f"{args.processes} posenc-load processes sharing the pool's connections (closed loop: "
            f"{pool_text}; open loop: the first pool's {pools[0][0]} connections at 50/80/95 % of that "
            f"pool's closed-loop rate, latency from the scheduled send, {OPEN_LOOP_TEXT}; percentiles from "
            f"the merged histograms). Positions uniform random int64 in [{POSITIONS[0]:.2g}, "
            f"{POSITIONS[1]:.2g}) for ENCODE_SPEC and the computed table, in the stored table's "
            f"{STORED_ROWS} rows for it; float32 rows of 512 B everywhere. posenc-server "
            f"`--max-abs-position {MAX_EXACT_POSITION} --threads N` on the first N CPUs, redis-server (no "
            f"persistence) on the first, the load on the rest. Server CPU ns per request: {cpu}; open loop: "
            f"/proc/<pid>/stat (perf stays off the latency runs). CPU busy: /proc/stat over the run (the "
            f"kernel's loopback work included, on whichever CPU ran it); a side over {SATURATED:.0%} set "
            f"the closed-loop rate. Stalled after the run: posenc-jitter spinning on every CPU at once "
            f"right after each open-loop run ({JITTER_SECONDS[args.quick]:g} s): the median % of time lost "
            f"in stalls > 50 us, and the longest stall. Machine: {machine_line()}.")
