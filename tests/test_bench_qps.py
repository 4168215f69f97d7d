"""`posenc bench qps` records, per run, how long the host took the server's CPU away."""

from __future__ import annotations

import os

from posenc.bench.qps import medians, stolen_ms


def test_stolen_time_is_read_from_the_steal_column_of_proc_stat():
    if not os.path.exists("/proc/stat"):
        assert stolen_ms(0) is None
        return
    before = stolen_ms(0)
    assert before is not None and before >= 0
    assert stolen_ms(0) >= before  # a counter: it only grows
    assert stolen_ms(1 << 20) is None  # no such CPU


def test_medians_keep_the_most_stolen_run():
    run = {"rps": 1.0, "p50_us": 1.0, "p99_us": 2.0, "p999_us": 3.0, "cpu_ns": None, "syscalls": None,
           "cycles": None}
    found = medians([{**run, "stolen_ms": ms} for ms in (0.0, 100.0, 10.0)])
    assert found["stolen_ms"] == 10.0 and found["stolen_ms_max"] == 100.0
    assert medians([{**run, "stolen_ms": None}])["stolen_ms_max"] is None
