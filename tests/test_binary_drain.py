"""SIGTERM while clients have requests in flight (issue 12): every complete request a client wrote
before the signal is answered, whether its bytes sat in the server's buffer, in the kernel's
queues or behind a reply backlog; what cannot be answered is reported truthfully; and the drain
ends by --drain-timeout-ms however the clients behave. Counts and contents only."""

import contextlib
import threading
import time

import numpy as np
import pytest
from binary_support import (  # noqa: F401 (fixtures)
    Raw, frame, positions_bytes, running_server, server_io, sin128_rows, store_and_root, tables)
from posenc.client import Client, ServerError, Status
from posenc.client.protocol import Opcode

pytestmark = pytest.mark.usefixtures("server_io")  # every test once on each event loop


def encode_requests(n, positions_per_request, seed):
    """n ENCODE_TABLE frames for table id 1 (sin128) with ids 1..n, and each one's positions."""
    rng = np.random.default_rng(seed)
    positions = [rng.integers(0, 4096, positions_per_request) for _ in range(n)]
    data = b"".join(frame(Opcode.ENCODE_TABLE, k + 1, positions=positions_bytes(p), count=len(p), table_id=1)
                    for k, p in enumerate(positions))
    return data, positions


def read_all(conn):
    """Every reply until EOF, in order."""
    replies = []
    while (got := conn.reply()) is not None:
        replies.append(got)
    return replies


def assert_all_answered(replies, positions, sin128_rows):
    assert len(replies) == len(positions), f"{len(replies)} of {len(positions)} answered"
    for k, (request_id, reply) in enumerate(replies):
        assert request_id == k + 1 and not isinstance(reply, ServerError), (k, reply)
        assert np.array_equal(reply.array(), sin128_rows[positions[k]])


@contextlib.contextmanager
def serving(tables, **flags):
    """A one-thread server with sin128 resolved (id 1); the test sends it SIGTERM itself."""
    with running_server(tables, threads=1, **flags) as srv:
        Client(srv.address).resolve("sin128")
        yield srv


def test_a_backlog_written_in_one_go_is_answered_in_full_after_sigterm(tables, sin128_rows):
    """100 x 256 positions = 12.5 MiB of replies: most requests still sit in the kernel's queues
    (the server stops reading at 1 MiB of unsent replies) when the signal comes."""
    data, positions = encode_requests(100, 256, seed=1)
    with serving(tables) as srv:
        with Raw(srv.address, timeout=30) as conn:
            writer = threading.Thread(target=conn.send, args=(data,))
            writer.start()
            time.sleep(0.5)
            srv.process.send_signal(15)
            replies = read_all(conn)
            writer.join(10)
        assert srv.process.wait(10) == 0
    assert_all_answered(replies, positions, sin128_rows)


def test_a_client_reading_all_along_gets_every_reply(tables, sin128_rows):
    data, positions = encode_requests(2000, 16, seed=2)
    with serving(tables) as srv:
        with Raw(srv.address, timeout=30) as conn:
            replies = []

            def read_slowly():  # a reader slower than the server: a backlog is queued when the signal comes
                while (got := conn.reply()) is not None:
                    replies.append(got)
                    time.sleep(0.0005)
            reader = threading.Thread(target=read_slowly)
            reader.start()
            conn.send(data)  # returns once the kernel holds every byte: "sent" from the client's side
            time.sleep(0.5)
            srv.process.send_signal(15)
            reader.join(30)
        assert srv.process.wait(10) == 0
    assert_all_answered(replies, positions, sin128_rows)


def test_an_unfinished_frame_is_reported_with_its_true_size(tables):
    with serving(tables, drain_timeout_ms=600) as srv:
        with Raw(srv.address, timeout=30) as conn:
            unfinished = frame(Opcode.ENCODE_TABLE, 9, positions=positions_bytes(range(121)), count=121, table_id=1)
            conn.send(frame(Opcode.PING, 1, aux=b"a") + frame(Opcode.PING, 2, aux=b"b") + unfinished[:20])
            assert [conn.reply()[0] for _ in range(2)] == [1, 2]
            srv.process.send_signal(15)
            err = conn.error(Status.SHUTTING_DOWN)
            assert err.request_id == 0 and err.closes
            assert "--drain-timeout-ms 600" in str(err)
            assert str(err).endswith(f"unanswered: 20 of the {len(unfinished)} bytes of a frame"), str(err)
            assert conn.closed()
        assert srv.process.wait(10) == 0


def test_idle_connections_end_with_eof_soon_after_sigterm(tables):
    with serving(tables) as srv:
        with Raw(srv.address) as a, Raw(srv.address) as b:
            a.send(frame(Opcode.PING, 1))
            assert a.reply()[0] == 1
            t0 = time.monotonic()
            srv.process.send_signal(15)
            assert a.closed() and b.closed()  # clean EOF, no error frame: nothing was unanswered
            waited = time.monotonic() - t0
        assert srv.process.wait(10) == 0
    assert waited < 4.5, waited  # quiet connections do not wait for the 5 s drain timeout


@pytest.mark.parametrize("client", ["keeps sending", "never reads"])
def test_the_drain_ends_at_the_timeout_whatever_the_client_does(tables, client):
    stop = threading.Event()
    with serving(tables, drain_timeout_ms=800) as srv:
        with Raw(srv.address, timeout=30) as conn:
            if client == "keeps sending":
                def pump():
                    k = 0
                    while not stop.is_set():
                        try:
                            conn.send(frame(Opcode.PING, k, aux=b"x" * 64))
                        except OSError:
                            return
                        k += 1
                        got = conn.reply()
                        if got is None or isinstance(got[1], ServerError):
                            return
                threading.Thread(target=pump, daemon=True).start()
            else:
                data, _ = encode_requests(400, 256, seed=3)  # 50 MiB of replies that are never read
                threading.Thread(target=lambda: _send_quietly(conn, data), daemon=True).start()
            time.sleep(0.3)
            t0 = time.monotonic()
            srv.process.send_signal(15)
            status = srv.process.wait(10)
            took = time.monotonic() - t0
            stop.set()
    assert status == 0
    assert 0.7 <= took < 5, took  # served until the 0.8 s deadline, then closed: not sooner, not much later


def _send_quietly(conn, data):
    try:
        conn.send(data)
    except OSError:
        pass  # the server closed the connection at its deadline
