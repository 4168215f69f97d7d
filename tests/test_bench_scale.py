"""`posenc bench scale` end to end on this machine: one row per server thread count (and per HTTP
worker count) that leaves as many CPUs for the load, with a rate, an efficiency of 1.00 at N = 1,
and what set the rate (the load's ceiling; how busy each side's CPUs were)."""

import os
import re
import subprocess
import sys

import pytest
from binary_support import build


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs a CPU for the server and one for the load")
def test_scale_bench_reports_each_thread_count():
    build()
    result = subprocess.run([sys.executable, "-m", "posenc.cli", "bench", "scale", "--seconds", "0.3", "--repeats",
                             "1", "--connections", "8"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    rows = re.findall(r"^\| (\d+) \| (\d+) \| ([\d,]+) \| [\d,]+-[\d,]+ \| ([\d.]+) \| ([\d,]+) \| (server|load generator)",
                      result.stdout, re.M)
    assert [int(r[0]) for r in rows] == list(range(1, len(os.sched_getaffinity(0)) // 2 + 1))
    assert rows[0][3] == "1.00"
    assert all(int(r[2].replace(",", "")) > 1000 and int(r[1]) >= int(r[0]) for r in rows)
    largest = len(os.sched_getaffinity(0)) // 2
    http = re.findall(r"^\| (\d+) \| (\d+) \| ([\d,]+) \| [\d,]+-[\d,]+ \| ([\d.]+) \| (\d+)% \| (\d+)% \| "
                      r"(server|load generator|neither)", result.stdout, re.M)
    assert [int(r[0]) for r in http] == list(range(1, largest + 1)), result.stdout
    assert http[0][3] == "1.00"
    assert all(int(r[2].replace(",", "")) > 100 for r in http)
    assert all(0 < int(r[4]) <= 100 and 0 < int(r[5]) <= 100 for r in http)


def test_scale_bench_refuses_unknown_parts():
    result = subprocess.run([sys.executable, "-m", "posenc.cli", "bench", "scale", "--parts", "gpu"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "parts: must name some of binary, http" in result.stderr
