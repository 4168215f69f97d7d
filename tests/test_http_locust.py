"""Locust smoke run through the SLO runner (loadtest/slo.py): it starts a server, runs the realistic mix
for a few seconds, and must see zero failures and report a P99 at microsecond resolution."""

import json
import math
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).parent.parent
sys.path.insert(0, str(ROOT / "loadtest"))
from latency import LatencyHistogram

CONFIG = """
[server]
workers = 1
binary_port = 0
shm_dir = "{shm_dir}"

[[tables]]
name = "sin128"
encoding = {{ kind = "sinusoidal", dim = 128 }}
stop = 8192

[[tables]]
name = "llama3.1-8b"
encoding = {{ kind = "rope", head_dim = 128, base = 500000.0 }}
stop = 8192
"""


def test_locust_smoke_run(tmp_path):
    shm_dir = tempfile.mkdtemp(prefix="posenc-locust-", dir="/dev/shm")
    config = tmp_path / "posenc.toml"
    config.write_text(CONFIG.format(shm_dir=shm_dir))
    out = tmp_path / "results"
    try:
        run = subprocess.run([sys.executable, str(ROOT / "loadtest" / "slo.py"), "--config", str(config),
                              "--run-time", "3s", "--users", "4", "--user-rps", "25", "--p99-ms", "10000",
                              "--out", str(out)], capture_output=True, text=True, timeout=120, check=False)
    finally:
        shutil.rmtree(shm_dir, ignore_errors=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    summary = json.loads((out / "latency.json").read_text())
    assert summary["failures"] == 0 and summary["passed"]
    assert summary["requests"] > 50
    assert 0 < summary["p50_ms"] <= summary["p99_ms"] <= summary["max_ms"] + 0.001
    assert math.isfinite(summary["p99_ms"])
    assert (out / "locust_stats.csv").exists() and (out / "report.html").exists()


def test_latency_histogram_resolves_microseconds():
    """Locust would report all of these as 0 or 1 ms."""
    histogram = LatencyHistogram()
    for k in range(1000):
        histogram.record_ms((200 + k // 10 + 0.5) / 1000)  # ten each of 200.5, 201.5, ... 299.5 us
    histogram.record_ms(0.4567)
    histogram.record_ms(250.0)  # 250 ms: 0.2% buckets up there
    # reported as the upper edge of the 1-us bucket holding the rank
    assert histogram.percentile_ms(50) == 0.251
    assert histogram.percentile_ms(99) == 0.300
    assert histogram.percentile_ms(99.9) == 0.457
    assert histogram.percentile_ms(100) == 250.0  # a bucket's edge, but never above the slowest request
    assert math.isnan(LatencyHistogram().percentile_ms(99))
