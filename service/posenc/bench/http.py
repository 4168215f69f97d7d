"""`posenc bench http`: wrk against `posenc serve` and against a bare ASGI app returning the same bytes.

Both servers run under the same uvicorn settings (uvloop, httptools, 1 worker, no access log,
no Server header; posenc with its connection guards, an httptools subclass) pinned to CPU 0
with taskset; wrk runs pinned to CPU 1. Cases (CASES below):
  * one row, binary and JSON: GET /v1/tables/sin128/rows/12345 (the raw-ASGI row route)
  * the same row as float16 (`?dtype=float16`: rounded once from its float64 value, TableSpec.cast_rows)
  * batch: POST /v1/tables/sin128/rows, 1024 int64 positions, raw float32 back (512 KiB)
  * spec requests, POST /v1/sinusoidal {"spec": {"dim": 128}} for 1 and 64 positions, JSON in and
    out, or raw int64 in (the spec in the query) and raw float32 out: what a business service
    sends; the sin128 table holds their rows (a table hit)
  * a computed one: POST /v1/rope/cos_sin, head_dim 128, 1 position, JSON (no table: the kernels)
Each request carries an X-Bench-Case header; the bare app (`bare_app` below) answers it with
the bytes posenc answered that request with (fetched from posenc before the runs), so the
ratio is what posenc's own per-request work costs. Cases interleave within each repeat;
medians are reported. `--in-process` measures the same cases without sockets instead
(`bench/http_inprocess.py`: CPU time per request of the app itself, far steadier than wrk).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

from ..cli.options import add_flag
from ..http.api.codecs import JSON, encode, json_printer
from ..http.runtime.launch import ServerProcess, free_port
from .http_cases import CASES, PAYLOAD_ENV, request_headers, service_config
from .timing import machine_line, markdown_table

def add_arguments(parser) -> None:
    add_flag(parser, "--seconds", old=("--duration",), type=int, default=10,
             help="measured seconds per run, whole seconds: wrk's -d (default %(default)s)")
    parser.add_argument("--connections", type=int, default=64, help="wrk connections (default %(default)s)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per case (median reported)")
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated subset of: %(default)s")
    parser.add_argument("--in-process", action="store_true",
                        help="no wrk, no sockets: the ASGI apps called in a loop, CPU time per request")
    parser.add_argument("--rounds", type=int, default=5, help="--in-process: rounds per case (best reported)")
    parser.add_argument("--requests", type=int, default=1000, help="--in-process: requests per round")


# --- driving wrk ------------------------------------------------------------------------------------
def ensure_wrk() -> str:
    """The wrk binary; installs the Debian package when missing and we may (root with apt-get)."""
    found = shutil.which("wrk")
    if found:
        return found
    install = ["apt-get", "install", "-y", "-q", "wrk"]
    if shutil.which("apt-get") and os.geteuid() == 0 and \
            subprocess.run(install, capture_output=True, check=False).returncode:
        subprocess.run(["apt-get", "update", "-q"], capture_output=True, check=False)  # a fresh machine's lists
        subprocess.run(install, capture_output=True, check=False)
    found = shutil.which("wrk")
    if not found:
        raise SystemExit("posenc bench http needs wrk: apt-get install wrk (Debian/Ubuntu)")
    return found


def _fetch_payloads(url: str, directory: Path) -> None:
    """Ask posenc each case once; the bare app then answers with exactly those bytes and headers."""
    kept = ("content-type", "x-posenc-dtype", "x-posenc-shape")
    for name, case in CASES.items():
        request = urllib.request.Request(url + case.path, data=case.body if case.method == "POST" else None,
                                         method=case.method, headers=request_headers(name, case))
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
            headers = [(k.lower(), v) for k, v in response.getheaders() if k.lower() in kept]
        (directory / f"{name}.body").write_bytes(body)
        (directory / f"{name}.json").write_text(json.dumps({"headers": headers}))
        (directory / f"{name}.request").write_bytes(case.body)
        lua = [f'wrk.method = "{case.method}"']
        if case.body:
            lua.append(f'wrk.body = io.open("{directory / f"{name}.request"}", "rb"):read("*a")')
        lua += [f'wrk.headers["{k}"] = "{v}"' for k, v in request_headers(name, case).items()]
        (directory / f"{name}.lua").write_text("\n".join(lua) + "\n")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wrk(wrk: str, url: str, pid: int, name: str, directory: Path, args) -> dict:
    argv = ["taskset", "-c", "1", wrk, "-t1", f"-c{args.connections}", f"-d{args.seconds}s", "--timeout", "10s",
            "--latency", "-s", str(directory / f"{name}.lua"), url + CASES[name].path]
    cpu_before = _cpu_seconds(pid)
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    cpu = _cpu_seconds(pid) - cpu_before
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    socket_errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    errors = sum(int(g) for g in socket_errors.groups()) if socket_errors else 0
    errors += int(non_2xx.group(1)) if non_2xx else 0
    return {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
            "p50": _ms(re.search(r"\s50%\s+(\S+)", out).group(1)),
            "p99": _ms(re.search(r"\s99%\s+(\S+)", out).group(1)), "errors": errors,
            "cpu_us": cpu / max(requests, 1) * 1e6}


def _ms(text: str) -> float:
    value, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", text).groups()
    return float(value) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[unit]


def _bare_server(directory: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = ["taskset", "-c", "0", sys.executable, "-m", "uvicorn", "posenc.bench.http_cases:bare_app", "--port", str(port),
            "--loop", "uvloop", "--http", "httptools", "--no-access-log", "--no-server-header", "--log-level",
            "warning"]
    process = subprocess.Popen(argv, env={**os.environ, PAYLOAD_ENV: str(directory)})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url + "/", timeout=1).read()
            return process, url
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("the bare ASGI server did not start")


def run(args) -> str:
    cases = [name.strip() for name in args.cases.split(",") if name.strip()]
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        raise SystemExit(f"unknown cases {unknown}; choose from {list(CASES)}")
    if args.in_process:
        from . import http_inprocess  # imported only when asked: it loads the app in this process
        return http_inprocess.run(cases, args.rounds, args.requests)
    if (os.cpu_count() or 1) < 2:
        raise SystemExit("posenc bench http pins the server and wrk to different CPUs: it needs 2")
    wrk = ensure_wrk()
    directory = Path(tempfile.mkdtemp(prefix="posenc-bench-http-"))
    shm_dir = tempfile.mkdtemp(prefix="posenc-bench-shm-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None)
    service = ServerProcess(service_config(shm_dir), cpus="0").start()
    bare = None
    results: dict[tuple[str, str], list[dict]] = {}
    try:
        _fetch_payloads(service.url, directory)
        floors = _json_floors(directory, cases)
        bare, bare_url = _bare_server(directory)
        for _ in range(args.repeats):
            for name in cases:
                for server, url, pid in (("bare ASGI", bare_url, bare.pid),
                                         ("posenc", service.url, service.process.pid)):
                    results.setdefault((name, server), []).append(_wrk(wrk, url, pid, name, directory, args))
    finally:
        service.stop()
        if bare is not None:
            bare.terminate()
            bare.wait()
        shutil.rmtree(directory, ignore_errors=True)
        shutil.rmtree(shm_dir, ignore_errors=True)
    return _report(results, cases, args, floors)


def _json_floors(directory: Path, cases: list[str]) -> dict[str, float]:
    """Case -> µs that printing its JSON answer alone takes here (posenc's codec: codecs.encode), for
    the JSON cases of more than one row: a floor no server that prints the numbers goes below,
    while the bare app sends stored bytes."""
    floors = {}
    for name in cases:
        case = CASES[name]
        if case.accept is None and case.encodings > 1:
            doc = json.loads((directory / f"{name}.body").read_bytes())
            arr = np.asarray(doc["data"], dtype=doc["dtype"])
            runs = 200
            best = min(_timed(lambda: encode(arr, JSON), runs) for _ in range(5))
            floors[name] = best * 1e6
    return floors


def _timed(step, runs: int) -> float:
    started = time.perf_counter()
    for _ in range(runs):
        step()
    return (time.perf_counter() - started) / runs


def _report(results, cases, args, floors) -> str:
    rows = []
    for name in cases:
        case = CASES[name]
        bare_runs = results[(name, "bare ASGI")]
        for server in ("bare ASGI", "posenc"):
            runs = results[(name, server)]
            rps = statistics.median(r["rps"] for r in runs)
            # each run against the bare app's run just before it: the machine's drift cancels in pairs
            ratio = statistics.median(r["rps"] / bare["rps"] for r, bare in zip(runs, bare_runs))
            rows.append([case.label, server, f"{rps:,.0f}", f"{rps * case.encodings:,.0f}",
                         f"{statistics.median(r['p50'] for r in runs):.2f}",
                         f"{statistics.median(r['p99'] for r in runs):.2f}", f"{ratio:.0%}",
                         f"{statistics.median(r['cpu_us'] for r in runs):.0f}", str(sum(r["errors"] for r in runs))])
    table = markdown_table(["request", "server", "req/s", "encodings/s", "P50 ms", "P99 ms", "vs bare ASGI",
                            "server CPU µs/req", "errors"], rows)
    notes = "".join(
        f" Printing the JSON of the answer to '{CASES[name].label}' alone (posenc's codec, {json_printer()}) takes {us:.0f} µs "
        f"here, {us / statistics.median(r['cpu_us'] for r in results[(name, 'bare ASGI')]):.1f}x the bare app's "
        f"whole request (which sends stored bytes): the floor of any server that prints those numbers."
        for name, us in floors.items())
    return (f"{table}\n\nwrk -t1 -c{args.connections} -d{args.seconds}s pinned to CPU 1; server pinned to CPU 0 "
            f"(uvicorn, uvloop, httptools, 1 worker); median of {args.repeats}, cases interleaved; 'vs bare ASGI' is the "
            f"median of each posenc run's req/s over the bare app's in the run just before it. Server CPU µs/req "
            f"is the server process's user+system time over the requests it answered (less sensitive than req/s "
            f"to other load on the machine).{notes} Machine: {machine_line()}.\n")
