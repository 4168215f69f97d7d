"""`posenc bench http`: wrk against `posenc serve` and against a bare ASGI app returning the same bytes.

Both servers run under the same uvicorn settings (uvloop, httptools, 1 worker, no access log,
no Server header; posenc with its connection guards, an httptools subclass) pinned to CPU 0
with taskset; wrk runs pinned to CPU 1. Cases:
  * one row, binary: GET /v1/tables/sin128/rows/12345, Accept: application/octet-stream (512 B)
  * one row, JSON:   the same without Accept
  * batch:           POST /v1/tables/sin128/rows, 1024 int64 positions, raw float32 back (512 KiB)
  * the same row through the FastAPI route (a `?dtype=float32` query skips the raw-ASGI fast path)
The bare app (`bare_app` below) answers each case with the bytes posenc sends, so the ratio is
what posenc's own per-request work costs. Cases interleave within each repeat; medians are reported.
"""

from __future__ import annotations

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

from ..http.codecs import JSON, RAW, encode
from ..http.launch import ServerProcess, free_port
from ..encodings import SinusoidalSpec
from ..tables import TableSpec
from .timing import machine_line, markdown_table

TABLE_ROWS = 131072
ROW_POSITION = 12345
BATCH = 1024
PAYLOAD_ENV = "POSENC_BARE_PAYLOADS"
#: Payload files the bare app serves, and the cases run (the FastAPI case gets the row-binary bytes).
_PAYLOADS = ("row-binary", "row-json", "batch")
_CASES = ("row-binary", "row-binary-fastapi", "row-json", "batch")


def add_arguments(parser) -> None:
    parser.add_argument("--duration", type=int, default=10, help="seconds per wrk run (default %(default)s)")
    parser.add_argument("--connections", type=int, default=64, help="wrk connections (default %(default)s)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per case (median reported)")


# --- the bare ASGI app: the ceiling ---------------------------------------------------------------
_payloads: dict[str, bytes] = {}


def _load_payloads() -> None:
    directory = Path(os.environ[PAYLOAD_ENV])
    for case in _PAYLOADS:
        _payloads[case] = (directory / case).read_bytes()


async def bare_app(scope, receive, send):
    """Drain the request, answer the bytes posenc would (picked by method and Accept), nothing else."""
    if scope["type"] != "http":
        message = await receive()
        if message["type"] == "lifespan.startup":
            _load_payloads()
            await send({"type": "lifespan.startup.complete"})
            await receive()
        await send({"type": "lifespan.shutdown.complete"})
        return
    more = True
    while more:
        more = (await receive()).get("more_body", False)
    if scope["method"] == "POST":
        case, media = "batch", RAW
    else:
        binary = any(k == b"accept" and v == RAW.encode() for k, v in scope["headers"])
        case, media = ("row-binary", RAW) if binary else ("row-json", JSON)
    body = _payloads[case]
    headers = [(b"content-type", media.encode()), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


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


def _write_payloads(directory: Path, batch_positions: np.ndarray) -> None:
    table = np.empty((TABLE_ROWS, 128), dtype=np.float32)
    TableSpec(SinusoidalSpec(128), 0, TABLE_ROWS).fill(table)
    (directory / "row-binary").write_bytes(encode(table[ROW_POSITION], RAW)[0])
    (directory / "row-json").write_bytes(encode(table[ROW_POSITION], JSON)[0])
    (directory / "batch").write_bytes(encode(table[batch_positions], RAW)[0])
    (directory / "batch-request").write_bytes(batch_positions.astype("<i8").tobytes())
    (directory / "batch.lua").write_text(
        'wrk.method = "POST"\n'
        f'wrk.body = io.open("{directory / "batch-request"}", "rb"):read("*a")\n'
        'wrk.headers["Content-Type"] = "application/octet-stream"\n'
        'wrk.headers["Accept"] = "application/octet-stream"\n')


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wrk(wrk: str, url: str, pid: int, case: str, directory: Path, args) -> dict:
    argv = ["taskset", "-c", "1", wrk, "-t1", f"-c{args.connections}", f"-d{args.duration}s", "--timeout", "10s",
            "--latency"]
    if case == "row-binary":
        argv += ["-H", f"Accept: {RAW}", f"{url}/v1/tables/sin128/rows/{ROW_POSITION}"]
    elif case == "row-binary-fastapi":  # a query string sends the same request through FastAPI's route
        argv += ["-H", f"Accept: {RAW}", f"{url}/v1/tables/sin128/rows/{ROW_POSITION}?dtype=float32"]
    elif case == "row-json":
        argv += [f"{url}/v1/tables/sin128/rows/{ROW_POSITION}"]
    else:
        argv += ["-s", str(directory / "batch.lua"), f"{url}/v1/tables/sin128/rows"]
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
    argv = ["taskset", "-c", "0", sys.executable, "-m", "uvicorn", "posenc.bench.http:bare_app", "--port", str(port),
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


def _service_config(shm_dir: str) -> str:
    return (f'[server]\nworkers = 1\nbinary_port = 0\nshm_dir = "{shm_dir}"\n\n[limits]\nmax_concurrency = 4096\n\n'
            f'[[tables]]\nname = "sin128"\nencoding = {{ kind = "sinusoidal", dim = 128 }}\n'
            f'start = 0\nstop = {TABLE_ROWS}\ndtype = "float32"\n')


def run(args) -> str:
    if (os.cpu_count() or 1) < 2:
        raise SystemExit("posenc bench http pins the server and wrk to different CPUs: it needs 2")
    wrk = ensure_wrk()
    directory = Path(tempfile.mkdtemp(prefix="posenc-bench-http-"))
    shm_dir = tempfile.mkdtemp(prefix="posenc-bench-shm-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None)
    positions = np.random.default_rng(0).integers(0, TABLE_ROWS, BATCH)
    _write_payloads(directory, positions)
    bare, bare_url = _bare_server(directory)
    service = ServerProcess(_service_config(shm_dir), cpus="0").start()
    results: dict[tuple[str, str], list[dict]] = {}
    try:
        for _ in range(args.repeats):
            for case in _CASES:
                for name, url, pid in (("bare ASGI", bare_url, bare.pid), ("posenc", service.url, service.process.pid)):
                    results.setdefault((case, name), []).append(_wrk(wrk, url, pid, case, directory, args))
    finally:
        service.stop()
        bare.terminate()
        bare.wait()
        shutil.rmtree(directory, ignore_errors=True)
        shutil.rmtree(shm_dir, ignore_errors=True)
    return _report(results, args)


def _report(results, args) -> str:
    labels = {"row-binary": "1 row, octet-stream (512 B)", "row-json": "1 row, JSON",
              "row-binary-fastapi": "1 row, octet-stream, through FastAPI (`?dtype=float32`)",
              "batch": f"{BATCH} rows, int64 in / float32 out (512 KiB)"}
    rows = []
    for case in _CASES:
        bare_rps = statistics.median(r["rps"] for r in results[(case, "bare ASGI")])
        for name in ("bare ASGI", "posenc"):
            runs = results[(case, name)]
            rps = statistics.median(r["rps"] for r in runs)
            encodings = rps * (BATCH if case == "batch" else 1)
            rows.append([labels[case], name, f"{rps:,.0f}", f"{encodings:,.0f}",
                         f"{statistics.median(r['p50'] for r in runs):.2f}",
                         f"{statistics.median(r['p99'] for r in runs):.2f}", f"{rps / bare_rps:.0%}",
                         f"{statistics.median(r['cpu_us'] for r in runs):.0f}", str(sum(r["errors"] for r in runs))])
    table = markdown_table(["request", "server", "req/s", "encodings/s", "P50 ms", "P99 ms", "vs bare ASGI",
                            "server CPU µs/req", "errors"], rows)
    return (f"{table}\n\nwrk -t1 -c{args.connections} -d{args.duration}s pinned to CPU 1; server pinned to CPU 0 "
            f"(uvicorn, uvloop, httptools, 1 worker); median of {args.repeats}, cases interleaved. Server CPU µs/req "
            f"is the server process's user+system time over the requests it answered (less sensitive than req/s "
            f"to other load on the machine). Machine: {machine_line()}.\n")
