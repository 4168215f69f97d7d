"""`posenc bench payments` end to end (--quick: every row, a fraction of a second each), and the
positions `posenc-load --positions` sends: in range, spread over it, and set by --seed."""

import itertools
import os
import shutil
import socket
import socketserver
import subprocess
import sys
import threading

import numpy as np
import pytest
from binary_support import build, table_store
from posenc import SinusoidalSpec
from posenc.bench.payments import LABELS, OPS
from posenc.client import Client, start_server
from posenc.client.protocol import HEADER_SIZE, REQUEST, RESPONSE, VERSION, Opcode, Status
from posenc.tables import TableSpec


def tables_of(markdown: str) -> list[list[dict[str, str]]]:
    """Each markdown table in `markdown`, as its rows: {column title: cell}."""
    tables = []
    for block in markdown.split("\n\n"):
        lines = [line.strip("|").split(" | ") for line in block.splitlines() if line.startswith("| ")]
        if lines:
            tables.append([dict(zip([title.strip() for title in lines[0]], [cell.strip() for cell in row],
                                    strict=True)) for row in lines[1:]])
    return tables


def number(cell: str) -> float:
    return float(cell.replace(",", ""))


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs a server CPU and a load CPU")
def test_quick_run_fills_every_row_and_column(tmp_path):
    build()
    page = tmp_path / "benchmarks.md"
    page.write_text("# b\n<!-- bench: payments -->\nold\n<!-- /bench: payments -->\ntail\n")
    result = subprocess.run([sys.executable, "-m", "posenc.cli", "bench", "payments", "--quick", "--readme",
                             str(page)], capture_output=True, text=True, timeout=240, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "bench payments: run 1/1 open loop 95%" in result.stderr  # progress as it goes
    markdown, _, told = result.stdout.rpartition("\nupdated the payments table in ")
    assert told.strip() == str(page) and markdown.strip() in page.read_text()
    assert page.read_text().endswith("tail\n")
    labels = [LABELS[op] for op in OPS if op != "redis" or shutil.which("redis-server")]
    closed, tail = tables_of(markdown)
    assert sorted((r["transport"], r["pool: conns x pipeline"], r["operation"]) for r in closed) == sorted(
        itertools.product(("TCP", "UNIX"), ("256 x 1", "64 x 4"), labels))
    assert sorted((r["transport"], r["of saturation"], r["operation"]) for r in tail) == sorted(
        itertools.product(("TCP", "UNIX"), ("50%", "80%", "95%"), labels))
    for row in closed + tail:
        assert all(row.values()) and row["server threads"] == "1" and row["errors"] == "0", row
        assert 0 < number(row["P50 us"]) <= number(row["P99 us"]) <= number(row["P99.9 us"]), row
        assert number(row["server CPU ns/req"]) > 0, row
    assert all(number(r["req/s (closed loop)"]) > 0 for r in closed)
    for row in tail:
        assert number(row["offered req/s (open loop)"]) > 0 and number(row["achieved req/s"]) > 0, row
        assert (row["P99 < 80 us"] == "met") == (number(row["P99 us"]) < 80), row
    assert "Server threads measured: 1" in markdown
    assert ("redis-server is missing" in markdown) == (len(labels) == 3)


class Recorder(socketserver.ThreadingTCPServer):
    """A posenc-server stand-in for ENCODE_SPEC: records each request's int64 positions and answers
    with rows of zeros of the spec's width."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), RecordingHandler)
        self.positions: list[int] = []
        self.lock = threading.Lock()


class RecordingHandler(socketserver.StreamRequestHandler):
    def handle(self):
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while len(head := self.rfile.read(HEADER_SIZE)) == HEADER_SIZE:
            length, _, opcode, dtype, _, request_id, _, count, aux_len, _ = REQUEST.unpack(head)
            body = self.rfile.read(length - HEADER_SIZE)
            assert opcode == Opcode.ENCODE_SPEC and dtype == 0
            width = int.from_bytes(body[4:8], "little")  # the inline spec's row_width
            with self.server.lock:
                self.server.positions += np.frombuffer(body[aux_len:], "<i8", count).tolist()
            rows = bytes(4 * width * count)
            self.wfile.write(RESPONSE.pack(HEADER_SIZE + len(rows), VERSION, opcode, 0, 0, request_id, count,
                                           width, 0, 0) + rows)


def recorded(*args: str) -> list[int]:
    with Recorder() as recorder:
        threading.Thread(target=recorder.serve_forever, daemon=True).start()
        try:
            port = str(recorder.server_address[1])
            subprocess.run([str(build() / "posenc-load"), "--port", port, "--spec-dim", "8", "-c", "1",
                            "-n", "400", "--warmup", "0", *args], check=True, capture_output=True, timeout=60)
        finally:
            recorder.shutdown()
        return recorder.positions


def test_positions_are_drawn_from_the_range_and_by_the_seed():
    lo, hi = 1_700_000_000_000, 1_700_000_000_050
    first = recorded("--positions", f"{lo}:{hi}", "--seed", "1")
    assert len(first) >= 400 and all(lo <= p < hi for p in first)
    assert set(first) == set(range(lo, hi))  # 400 draws of 50 values: each one (all but surely)
    # one connection, one request in flight: the draws arrive in order
    assert recorded("--positions", f"{lo}:{hi}", "--seed", "1")[:400] == first[:400]
    assert recorded("--positions", f"{lo}:{hi}", "--seed", "2")[:400] != first[:400]
    wide = recorded("--positions", f"{-2**63}:{2**63 - 1}")  # the whole int64 range: no overflow
    assert min(wide) < -2**61 and max(wide) > 2**61
    assert all(0 <= p < 131072 for p in recorded())  # without --positions: as before


def test_positions_outside_a_table_are_errors_and_inside_none():
    """Against the real server: a table of positions [1000, 1064) answers every request drawn from
    --positions 1000:1064, and refuses those a wider range draws."""
    build()
    with table_store({"narrow": TableSpec(SinusoidalSpec(128), 1000, 1064)}) as (_, root), \
            start_server(port=0, shm_dir=str(root), threads=1) as server:
        port = server.tcp_address.rpartition(":")[2]
        load = [str(build() / "posenc-load"), "--port", port, "--table", "narrow", "-c", "4", "-n", "2000",
                "--warmup", "0"]
        inside = subprocess.run([*load, "--positions", "1000:1064"], capture_output=True, text=True,
                                timeout=60, check=False)
        assert inside.returncode == 0 and "errors 0, lost 0" in inside.stdout, inside.stderr
        with Client(server.address) as client:
            assert client.stats()["errors_total"] == 0
        wider = subprocess.run([*load, "--positions", "999:1065"], capture_output=True, text=True,
                               timeout=60, check=False)
        assert wider.returncode == 1 and "errors 0," not in wider.stdout, wider.stdout
        assert f"first error: status {int(Status.POSITION_OUT_OF_RANGE)}," in wider.stderr, wider.stderr
