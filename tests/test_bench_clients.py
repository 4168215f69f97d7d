"""`posenc bench clients` end to end (--quick, the Go client only: every row, a fraction of a second
each), and which languages it drives."""

import itertools
import os
import subprocess
import sys

import pytest
from binary_support import build
from posenc.bench import clients
from posenc.errors import PosencError
from test_bench_payments import number, tables_of


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs a server CPU and a load CPU")
def test_quick_run_fills_every_row_for_posenc_load_and_the_go_client():
    build()
    result = subprocess.run([sys.executable, "-m", "posenc.cli", "bench", "clients", "--quick", "--languages", "go"],
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    closed, tail = tables_of(result.stdout)
    generators = {"posenc-load (C): 256 connections x 1, 4 processes", "go client: 256 workers, a pool of 4 connections"}
    assert sorted((r["transport"], r["generator"]) for r in closed) == sorted(
        itertools.product(("TCP", "UNIX"), generators))
    assert sorted((r["transport"], r["of posenc-load's saturation"], r["generator"]) for r in tail) == sorted(
        itertools.product(("TCP", "UNIX"), ("50%", "80%", "95%"), generators))
    for row in closed + tail:
        assert all(row.values()) and row["errors"] == "0", row
        assert 0 < number(row["P50 us"]) <= number(row["P99 us"]) <= number(row["P99.9 us"]), row
    for transport in ("TCP", "UNIX"):  # every generator is offered the same rates
        offered = {(r["of posenc-load's saturation"], r["offered req/s (open loop)"]) for r in tail
                   if r["transport"] == transport}
        assert len(offered) == 3


def test_languages_without_a_driver_are_left_out(tmp_path, monkeypatch):
    monkeypatch.setattr(clients, "CLIENTS", tmp_path)
    (tmp_path / "go").mkdir()
    (tmp_path / "go" / "run-payments").write_text("#!/bin/sh\n")
    (tmp_path / "go" / "run-payments").chmod(0o755)
    assert clients.drivers_of("go,java") == (["go"], ["java"])
    with pytest.raises(PosencError) as info:
        clients.drivers_of("go,rust")
    assert info.value.field == "languages"
