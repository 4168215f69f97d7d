"""A realistic request mix against `posenc serve`, with a microsecond latency histogram and an SLO check.

    locust -f loadtest/locustfile.py --headless -u 8 -r 8 -t 30s --host http://127.0.0.1:8000 \
           --p99-ms 20 --latency-out results/latency.json

Needs the tables of the embedded default config (`sin128`, `llama3.1-8b`). Every response is
checked (status, size). At exit the run fails (exit code 1) if any request failed or the P99
of our own histogram (see latency.py; locust's rounds to whole ms) exceeds --p99-ms.
"""

from __future__ import annotations

import io
import json
import random
import sys
from pathlib import Path

import numpy as np
from locust import FastHttpUser, constant_throughput, events, task

sys.path.insert(0, str(Path(__file__).parent))
from latency import LatencyHistogram

RAW = "application/octet-stream"
SINUSOIDAL, ROPE = "sin128", "llama3.1-8b"
BATCH = 64
HISTOGRAM = LatencyHistogram()


@events.init_command_line_parser.add_listener
def _arguments(parser):
    parser.add_argument("--p99-ms", type=float, default=50.0, help="fail the run if P99 exceeds this (ms)")
    parser.add_argument("--latency-out", default="", help="write the microsecond latency summary (JSON) here")
    parser.add_argument("--user-rps", type=float, default=50.0, help="requests per second per user")


@events.request.add_listener
def _record(response_time, exception, **_):
    if exception is None:
        HISTOGRAM.record_ms(response_time)


@events.quitting.add_listener
def _slo(environment, **_):
    options = environment.parsed_options
    summary = HISTOGRAM.summary()
    summary["failures"] = environment.stats.total.num_failures
    summary["p99_threshold_ms"] = options.p99_ms
    verdict = []
    if summary["failures"]:
        verdict.append(f"{summary['failures']} requests failed")
    if not summary["requests"]:
        verdict.append("no successful request was measured")
    elif summary["p99_ms"] > options.p99_ms:
        verdict.append(f"P99 {summary['p99_ms']:.3f} ms is over the {options.p99_ms:g} ms SLO")
    summary["passed"] = not verdict
    if options.latency_out:
        Path(options.latency_out).write_text(json.dumps(summary, indent=2))
    print(f"latency (us resolution): {json.dumps(summary)}", file=sys.stderr)
    if verdict:
        print("SLO FAILED: " + "; ".join(verdict), file=sys.stderr)
        environment.process_exit_code = 1


class EncodingClient(FastHttpUser):
    """What a service using posenc sends: mostly single-row lookups, some batches and computations."""

    def wait_time(self):
        return constant_throughput(self.environment.parsed_options.user_rps)(self)

    def on_start(self):
        self.ranges = {}
        for name in (SINUSOIDAL, ROPE):
            with self.client.get(f"/v1/tables/{name}", name="/v1/tables/{name}", catch_response=True) as r:
                if r.status_code != 200:
                    r.failure(f"table {name} is not served ({r.status_code})")
                    continue
                spec = r.json()["spec"]
                self.ranges[name] = (spec["start"], spec["stop"], r.json()["shape"][1])

    def _position(self, name: str) -> int:
        start, stop, _ = self.ranges[name]
        return random.randrange(start, stop)

    def _expect(self, response, nbytes: int | None = None):
        if response.status_code != 200:
            response.failure(f"status {response.status_code}: {response.text[:200]}")
        elif nbytes is not None and len(response.content) != nbytes:
            response.failure(f"{len(response.content)} bytes, expected {nbytes}")

    @task(10)
    def row_binary(self):
        if SINUSOIDAL in self.ranges:
            width = self.ranges[SINUSOIDAL][2]
            with self.client.get(f"/v1/tables/{SINUSOIDAL}/rows/{self._position(SINUSOIDAL)}", headers={"Accept": RAW},
                                 name="GET row (binary)", catch_response=True) as r:
                self._expect(r, 4 * width)

    @task(3)
    def row_json(self):
        if ROPE in self.ranges:
            with self.client.get(f"/v1/tables/{ROPE}/rows/{self._position(ROPE)}", name="GET row (JSON)",
                                 catch_response=True) as r:
                self._expect(r)

    @task(3)
    def batch_binary(self):
        if SINUSOIDAL in self.ranges:
            start, stop, width = self.ranges[SINUSOIDAL]
            positions = np.random.randint(start, stop, BATCH, dtype="<i8")
            with self.client.post(f"/v1/tables/{SINUSOIDAL}/rows", data=positions.tobytes(),
                                  headers={"Content-Type": RAW, "Accept": RAW}, name=f"POST {BATCH} rows (binary)",
                                  catch_response=True) as r:
                self._expect(r, 4 * width * BATCH)

    @task(2)
    def sinusoidal_spec(self):
        positions = [random.uniform(0, 1e5) for _ in range(8)]
        with self.client.post("/v1/sinusoidal", json={"spec": {"dim": 64, "layout": "t2t"}, "positions": positions},
                              name="POST sinusoidal spec (JSON)", catch_response=True) as r:
            self._expect(r)

    @task(1)
    def rope_apply(self):
        q = np.random.standard_normal((4, 16, 64)).astype(np.float32)
        body = io.BytesIO()
        np.save(body, q)
        with self.client.post("/v1/rope/apply", data=body.getvalue(),
                              params={"spec": json.dumps({"head_dim": 64}), "offset": str(random.randrange(10**5))},
                              headers={"Content-Type": "application/x-npy", "Accept": RAW},
                              name="POST rope apply (npy)", catch_response=True) as r:
            self._expect(r, q.nbytes)

    @task(1)
    def alibi_slopes(self):
        with self.client.post("/v1/alibi/slopes", json={"n_heads": random.choice([8, 12, 32, 40])},
                              name="POST alibi slopes", catch_response=True) as r:
            self._expect(r)

