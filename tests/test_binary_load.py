"""Many clients at once, the native load generator, and shutdown while the server is loaded.
Deterministic checks only (counts, contents, exit codes); nothing here is timed."""

import json
import socket
import socketserver
import subprocess
import threading

import numpy as np
import pytest
from binary_support import (  # noqa: F401 (fixtures)
    Raw, build, frame, positions_bytes, running_server, server_io, sin128_rows, store_and_root, table_store, tables)
from posenc.client import Client, ServerError, Status
from posenc.client.protocol import Opcode

pytestmark = pytest.mark.usefixtures("server_io")  # every test once on each event loop


def run_loadgen(*args, ok=True) -> dict:
    result = subprocess.run([str(build() / "posenc-load"), *args, "--json"], capture_output=True, text=True,
                            timeout=120, check=False)
    assert (result.returncode == 0) == ok, result.stderr
    return json.loads(result.stdout)


def test_many_concurrent_clients_get_their_own_rows(tables, sin128_rows):
    errors = []

    def worker(seed, address):
        rng = np.random.default_rng(seed)
        try:
            with Client(address) as c:
                for _ in range(30):
                    positions = rng.integers(0, 4096, rng.integers(1, 40))
                    assert np.array_equal(c.encode("sin128", positions), sin128_rows[positions])
        except Exception as exc:  # noqa: BLE001 - reported below with its thread
            errors.append((seed, exc))

    with running_server(tables, threads=2) as srv:
        threads = [threading.Thread(target=worker, args=(seed, srv.address if seed % 2 else srv.unix_address))
                   for seed in range(64)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        stats = Client(srv.address).stats()
    assert not errors, errors[:3]
    assert stats["connections"]["accepted"] >= 64 and stats["errors_total"] == 0


LOADS = {
    "table, 300 connections, pipelined, batched": ["--table", "sin128", "-c", "300", "-P", "8", "-b", "4"],
    "inline spec, bfloat16": ["--spec-dim", "64", "-c", "8", "-P", "4", "--dtype", "bfloat16"],
    "open loop": ["--table", "sin128", "-c", "10", "--rate", "20000"],
    "PING with a 512-byte payload": ["--ping", "512", "-c", "8", "-P", "4"],
}


@pytest.mark.parametrize("load", sorted(LOADS))
@pytest.mark.parametrize("socket_kind", ["tcp", "unix"])
def test_load_generator_runs_bounded_and_clean(tables, load, socket_kind):
    n = 5000
    with running_server(tables, threads=2) as srv:
        where = (["--port", srv.tcp_address.rpartition(":")[2]] if socket_kind == "tcp"
                 else ["--unix", srv.unix_address.removeprefix("unix:")])
        report = run_loadgen(*where, *LOADS[load], "-n", str(n), "--warmup", "0", "--seconds", "60")
        stats = Client(srv.address).stats()
    assert report["requests"] == n and report["errors"] == 0 and report["lost"] == 0
    assert 0 < report["p50_us"] <= report["p95_us"] <= report["p99_us"] <= report["p999_us"] <= report["max_us"]
    assert stats["errors_total"] == 0 and stats["requests_total"] >= n


def test_busy_polling_serves_the_same_and_is_reported(tables, sin128_rows):
    with running_server(tables, threads=1, busy_poll_us=500) as srv, Client(srv.address) as c:
        assert np.array_equal(c.encode("sin128", [7, 4095]), sin128_rows[[7, 4095]])
        assert c.stats()["busy_poll_us"] == 500


def test_busy_polling_does_not_change_the_loop_auto_picks(tables):
    """`--io auto` picks the same loop with or without --busy-poll-us: busy polling's tail stalls
    were the hypervisor taking the vCPU away, on either loop (docs/server-io.md)."""
    with running_server(tables, threads=1, io="auto") as plain, Client(plain.address) as c:
        loop = c.stats()["io"]
    with running_server(tables, threads=1, io="auto", busy_poll_us=200) as busy, Client(busy.address) as c:
        assert c.stats()["io"] == loop


def test_shutdown_while_loaded_answers_what_arrived_and_exits_cleanly(tables, sin128_rows):
    outcomes = []
    started = threading.Barrier(9)
    first_batches = threading.Semaphore(0)  # released once by each hammer after its first whole batch

    def hammer(address, seed):
        """Pipeline batches of 32 until the server goes; every reply must be whole and right."""
        rng = np.random.default_rng(seed)
        answered, ending = 0, None
        try:
            with Client(address, timeout=30) as c:
                started.wait()
                while True:
                    pipe = c.pipeline()
                    batch = [rng.integers(0, 4096, 3) for _ in range(32)]
                    for positions in batch:
                        pipe.encode(1, positions)
                    for positions, rows in zip(batch, pipe.execute(raise_on_error=False)):
                        if isinstance(rows, Exception):
                            raise rows
                        assert np.array_equal(rows, sin128_rows[positions])
                        answered += 1
                    if answered == len(batch):
                        first_batches.release()
        except ServerError as exc:
            ending = exc.status
        except ConnectionError:  # EOF (ProtocolError), reset or broken pipe: the server has gone
            ending = "closed"
        outcomes.append((answered, ending))

    with running_server(tables, threads=2, drain_timeout_ms=5000) as srv:
        Client(srv.address).resolve("sin128")  # id 1
        threads = [threading.Thread(target=hammer, args=(srv.address, seed)) for seed in range(8)]
        for t in threads:
            t.start()
        started.wait()
        for _ in threads:  # every hammer has had replies (a busy machine can starve one for a while)
            assert first_batches.acquire(timeout=30)
        status = srv.stop(timeout=20)
        for t in threads:
            t.join(30)
    assert status == 0
    assert len(outcomes) == 8 and all(answered > 0 for answered, _ in outcomes), outcomes
    assert all(ending in (Status.SHUTTING_DOWN, "closed") for _, ending in outcomes), outcomes


def test_a_draining_server_answers_a_request_it_already_received(tables):
    with running_server(tables, threads=1) as srv, Raw(srv.address) as conn:
        conn.send(frame(Opcode.ENCODE_TABLE, 5, positions=positions_bytes([3]), count=1, table_id=0)
                  + frame(Opcode.PING, 6, aux=b"last"))
        srv.process.send_signal(15)  # SIGTERM with both requests in the server's socket buffer
        first = conn.reply()
        second = conn.reply()
        assert conn.closed()  # then EOF: the server is leaving
        conn.close()
        assert srv.process.wait(10) == 0
    assert first[0] == 5 and isinstance(first[1], ServerError)  # id 0 is unknown: still an answer
    assert second[0] == 6 and second[1].aux == b"last"


class RespResponder(socketserver.ThreadingTCPServer):
    """A tiny redis stand-in: answers each RESP `GET key` with a bulk string for KEY, nil for any
    other key, and counts the commands it parsed."""

    daemon_threads = True
    allow_reuse_address = True
    KEY, VALUE = b"k1", b"v" * 512

    def __init__(self):
        super().__init__(("127.0.0.1", 0), RespHandler)
        self.commands = 0
        self.lock = threading.Lock()


class RespHandler(socketserver.StreamRequestHandler):
    def handle(self):
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            head = self.rfile.readline()
            if not head:
                return
            assert head == b"*2\r\n", head
            parts = []
            for _ in range(2):
                size = int(self.rfile.readline()[1:])
                parts.append(self.rfile.read(size + 2)[:-2])
            assert parts[0] == b"GET", parts
            with self.server.lock:
                self.server.commands += 1
            value = self.server.VALUE if parts[1] == self.server.KEY else None
            self.wfile.write(b"$-1\r\n" if value is None else b"$%d\r\n%s\r\n" % (len(value), value))


def test_resp_mode_speaks_redis_get_and_counts_misses():
    with RespResponder() as responder:
        threading.Thread(target=responder.serve_forever, daemon=True).start()
        port = str(responder.server_address[1])
        hits = run_loadgen("--resp", "--key", "k1", "--port", port, "-c", "4", "-P", "4", "-n", "2000", "--warmup", "0")
        assert hits["requests"] == 2000 and hits["errors"] == 0 and hits["lost"] == 0
        assert responder.commands == hits["completed"] >= 2000
        misses = run_loadgen("--resp", "--key", "nope", "--port", port, "-c", "2", "-n", "100", "--warmup", "0",
                             ok=False)  # nil replies are errors: exit status 1
        assert misses["requests"] == 100 and misses["errors"] == misses["completed"]
        responder.shutdown()
