"""Headless SLO run: start `posenc serve`, run locust for a bounded time on 127.0.0.1, judge the result.

    python loadtest/slo.py                       # embedded default config, 30 s, P99 <= 20 ms
    python loadtest/slo.py --run-time 5s --users 4 --p99-ms 50 --config my.toml
    python loadtest/slo.py --host http://127.0.0.1:8000   # an already running server

Writes locust's CSV and HTML report and latency.json (our microsecond histogram) into --out.
Exits non-zero if any request failed or the P99 exceeds --p99-ms. One locust process (about
3.8 k req/s on one core here): a latency check at a fixed offered load, not a saturation test.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from posenc.config import DEFAULT_TOML
from posenc.http.runtime.launch import ServerProcess

HERE = Path(__file__).parent


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--host", help="test this server instead of starting one")
    p.add_argument("--config", type=Path, help="config for the started server (default: the embedded one)")
    p.add_argument("--users", type=int, default=8)
    p.add_argument("--user-rps", type=float, default=50.0, help="requests per second per user (default 50)")
    p.add_argument("--run-time", default="30s", help="locust --run-time (default 30s)")
    p.add_argument("--p99-ms", type=float, default=20.0, help="SLO: P99 latency in ms (default 20)")
    p.add_argument("--out", type=Path, default=HERE / "results", help="CSV/HTML/latency.json directory")
    return p.parse_args(argv)


def run_locust(host: str, args) -> int:
    args.out.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "locust", "-f", str(HERE / "locustfile.py"), "--headless", "--host", host,
            "-u", str(args.users), "-r", str(args.users), "--run-time", args.run_time, "--stop-timeout", "5",
            "--only-summary", "--csv", str(args.out / "locust"), "--html", str(args.out / "report.html"),
            "--p99-ms", str(args.p99_ms), "--user-rps", str(args.user_rps),
            "--latency-out", str(args.out / "latency.json")]
    return subprocess.run(argv, check=False).returncode


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.host:
        status = run_locust(args.host, args)
    else:
        config = args.config.read_text() if args.config else DEFAULT_TOML
        with ServerProcess(config) as server:
            status = run_locust(server.url, args)
    summary = json.loads((args.out / "latency.json").read_text()) if (args.out / "latency.json").exists() else {}
    print(f"\nP50 {summary.get('p50_ms', float('nan')):.3f} ms, P99 {summary.get('p99_ms', float('nan')):.3f} ms, "
          f"{summary.get('requests', 0)} requests, {summary.get('failures', '?')} failed -> "
          f"{'PASS' if status == 0 else 'FAIL'} (SLO: P99 <= {args.p99_ms:g} ms, no failures); reports in {args.out}")
    return status


if __name__ == "__main__":
    sys.exit(main())
