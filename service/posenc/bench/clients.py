"""`posenc bench clients`: the payments scenario (`posenc bench payments`) driven by the language
clients, beside posenc-load, in the same run: what a real client costs.

The scenario's calls: the 128-d float32 row of a random millisecond timestamp in [1.7e12, 1.8e12) from
a named computed table, one position a request. posenc-load (C, `--connections` connections with one
request in flight each, `--processes` processes) is the generator the payments tables use; each
client's driver (`clients/<lang>/run-payments ADDRESS TABLE [flags]`, e.g. clients/go/cmd/posenc-payments)
calls its library as a service would: `--client-threads` threads or goroutines on one client holding a pool of
`--pool` connections. Closed loop first (the saturation of each), then open loop at 50, 80 and 95 % of
posenc-load's saturation, offered to every driver alike, latency from each request's scheduled time.
The server runs alone on the first CPU (`--threads 1`), every generator on the others, one at a time.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from ..cli.options import add_flag
from ..client.process import REPO_BINARY, pinned, start_server
from ..encodings import SinusoidalSpec
from ..errors import PosencError
from ..limits import MAX_EXACT_POSITION
from ..shm import TableStore
from ..tables import TableSpec
from .payments import COMPUTED, FRACTIONS, LABELS, POSITIONS, TRANSPORTS, measure_pool
from .qps import LOADGEN, Target, port_of, socket_path
from .timing import machine_line, markdown_table

CLIENTS = REPO_BINARY.parents[2] / "clients"
LANGUAGES = ("go", "java")
LOAD = "posenc-load"
FIGURES = ("rps", "p50_us", "p99_us", "p999_us")


def add_arguments(parser) -> None:
    parser.add_argument("--seconds", type=float, default=2.0, help="measured seconds per run (default %(default)s)")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds before measuring (default %(default)s)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="runs of each row, generators alternating; medians are reported (default %(default)s)")
    parser.add_argument("--languages", default=",".join(LANGUAGES),
                        help="clients to drive, comma-separated (default %(default)s; one without "
                        "clients/<lang>/run-payments is left out and said so)")
    parser.add_argument("--connections", type=int, default=256,
                        help="posenc-load's connections, one request in flight each (default %(default)s)")
    parser.add_argument("--processes", type=int, default=4,
                        help="posenc-load processes sharing them (default %(default)s)")
    add_flag(parser, "--client-threads", old=("--workers",), type=int, default=256,
             help="each client's threads or goroutines calling it (default %(default)s)")
    parser.add_argument("--pool", type=int, default=4, help="connections of each client's pool (default %(default)s)")
    parser.add_argument("--quick", action="store_true", help="a smoke run (0.3 s a point, one repeat): not figures")


def progress(line: str) -> None:
    print(f"bench clients: {line}", file=sys.stderr, flush=True)


def drivers_of(text: str) -> tuple[list[str], list[str]]:
    """(languages with a run-payments script, languages asked for without one)."""
    asked = [lang for lang in text.split(",") if lang]
    if not asked or any(lang not in LANGUAGES for lang in asked):
        raise PosencError("languages", f"must be some of {','.join(LANGUAGES)}; got {text!r}")
    found = [lang for lang in asked if os.access(CLIENTS / lang / "run-payments", os.X_OK)]
    return found, [lang for lang in asked if lang not in found]


def run_driver(language: str, address: str, load_cpus: list[int], args, rate: float = 0) -> dict:
    """One run of a client's driver, pinned to the load CPUs: its JSON report."""
    argv = [str(CLIENTS / language / "run-payments"), address, COMPUTED, "-seconds", str(args.seconds),
            "-warmup", str(args.warmup), "-workers", str(args.client_threads), "-pool", str(args.pool),
            "-positions", "{}:{}".format(*POSITIONS), *(["-rate", f"{rate:.0f}"] if rate else [])]
    done = subprocess.run(pinned(set(load_cpus), argv), capture_output=True, text=True, check=False,
                          timeout=args.seconds + args.warmup + 300)
    if done.returncode != 0:
        raise PosencError(language, f"run-payments exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def run(args) -> str:
    if not all(path.exists() for path in (REPO_BINARY, LOADGEN)):
        raise PosencError("bench", "native binaries missing: run `make native-server` first")
    if args.quick:
        args.seconds, args.warmup, args.repeats = 0.3, 0.2, 1
    drivers, missing = drivers_of(args.languages)
    if missing:
        progress(f"no clients/<lang>/run-payments for {', '.join(missing)}: left out")
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise PosencError("bench", "needs two CPUs: the server's and the load's")
    layout = {"server": cpus[:1], "load": cpus[1:]}
    shm_parent = "/dev/shm" if Path("/dev/shm").is_dir() else None
    with tempfile.TemporaryDirectory(prefix="posenc-clients-", dir=shm_parent) as shm, \
            tempfile.TemporaryDirectory(prefix="posenc-clients-sock-") as sockets:
        store = TableStore(shm)
        try:
            store.publish(COMPUTED, TableSpec(SinusoidalSpec(128), 0, MAX_EXACT_POSITION, computed=True))
            with start_server(port=0, unix_path=str(Path(sockets) / "posenc.sock"), shm_dir=shm, threads=1,
                              cpus=set(layout["server"]), max_abs_position=MAX_EXACT_POSITION) as server:
                rows, saturation = measure(server, layout, drivers, args)
        finally:
            store.close()
    return report(rows, saturation, drivers, missing, args)


def measure(server, cpus: dict, drivers: list[str], args) -> tuple[dict, dict]:
    """Every run: closed loop for posenc-load and each driver, then the open-loop rates. Medians per row."""
    positions = ["--positions", "{}:{}".format(*POSITIONS)]
    targets = {"tcp": Target(LABELS["computed"], server.pid, ["--port", port_of(server)], ["--table", COMPUTED,
                                                                                           *positions]),
               "unix": Target(LABELS["computed"], server.pid, ["--unix", socket_path(server)],
                              ["--table", COMPUTED, *positions])}
    addresses = {"tcp": server.tcp_address, "unix": server.unix_address}
    samples: dict[tuple, list[dict]] = defaultdict(list)

    def one(key: tuple, generator: str, transport: str, rate: float = 0) -> None:
        if generator == LOAD:
            depth = () if rate else ("-P", "1")
            r = measure_pool(targets[transport], cpus, [], args, args.connections, *depth, rate=rate)
        else:
            r = run_driver(generator, addresses[transport], cpus["load"], args, rate)
        samples[key].append(r)
        progress(f"{key}: {r['rps']:,.0f} req/s, P99 {r['p99_us']:,.1f} us")

    for _ in range(args.repeats):
        for transport in TRANSPORTS:
            for generator in (LOAD, *drivers):
                one(("closed", transport, generator), generator, transport)
    saturation = {t: statistics.median(r["rps"] for r in samples[("closed", t, LOAD)]) for t in TRANSPORTS}
    for _ in range(args.repeats):
        for fraction in FRACTIONS:
            for transport in TRANSPORTS:
                for generator in (LOAD, *drivers):
                    one(("open", fraction, transport, generator), generator, transport,
                        fraction * saturation[transport])
    rows = {key: {**{f: statistics.median(r[f] for r in runs) for f in FIGURES},
                  "errors": sum(r["errors"] + r.get("lost", 0) for r in runs)} for key, runs in samples.items()}
    return rows, saturation


def how(generator: str, args) -> str:
    if generator == LOAD:
        return f"posenc-load (C): {args.connections} connections x 1, {args.processes} processes"
    return f"{generator} client: {args.client_threads} workers, a pool of {args.pool} connections"


def report(rows: dict, saturation: dict, drivers: list[str], missing: list[str], args) -> str:
    generators = (LOAD, *drivers)
    closed = [[t.upper(), how(g, args), f"{r['rps']:,.0f}", f"{r['p50_us']:.1f}", f"{r['p99_us']:.1f}",
               f"{r['p999_us']:.1f}", str(r["errors"])]
              for t in TRANSPORTS for g in generators for r in [rows[("closed", t, g)]]]
    open_ = [[t.upper(), f"{fraction:.0%}", f"{fraction * saturation[t]:,.0f}", how(g, args), f"{r['rps']:,.0f}",
              f"{r['p50_us']:.1f}", f"{r['p99_us']:.1f}", f"{r['p999_us']:.1f}", str(r["errors"])]
             for fraction in FRACTIONS for t in TRANSPORTS for g in generators
             for r in [rows[("open", fraction, t, g)]]]
    tables = (markdown_table(["transport", "generator", "req/s (closed loop)", "P50 us", "P99 us", "P99.9 us",
                              "errors"], closed) + "\n\n" +
              markdown_table(["transport", "of posenc-load's saturation", "offered req/s (open loop)", "generator",
                              "achieved req/s", "P50 us", "P99 us", "P99.9 us", "errors"], open_))
    left_out = f" No clients/<lang>/run-payments for {', '.join(missing)}: left out." if missing else ""
    return (f"{tables}\n\nMedians of {args.repeats} runs of {args.seconds:g} s (after {args.warmup:g} s warm-up) "
            f"per row{' (--quick: a smoke run, not figures)' if args.quick else ''}, the generators taking "
            f"turns; {LABELS['computed']}, positions uniform random int64 in [{POSITIONS[0]:.2g}, "
            f"{POSITIONS[1]:.2g}), float32 rows of 512 B. posenc-server `--threads 1 --max-abs-position "
            f"{MAX_EXACT_POSITION}` on the first CPU, every generator on the others; open loop: latency from "
            f"each request's scheduled time, the rates offered to every generator alike.{left_out} "
            f"Machine: {machine_line()}.")
