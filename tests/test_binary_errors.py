"""Every error path of the binary protocol, with raw frames: the ones that close the connection
(after an error frame, and only that connection), and the ones that answer one request and
keep it. Modelled on Redis's protocol tests: negative and huge lengths, garbage, truncation."""

import os
import struct
import tempfile
import time
from pathlib import Path

import numpy as np
import posenc
import pytest
from binary_support import Raw, frame, positions_bytes, running_server, server_io, table_store  # noqa: F401 (fixtures)
from posenc.client import Client, ServerError, ServerProcess, Status, server_argv, start_server
from posenc.client.inline import sinusoidal_aux
from posenc.client.protocol import REQUEST, SPEC_PREFIX, Opcode, PositionKind, SpecFlag, WireDtype
from posenc.errors import PosencError

pytestmark = pytest.mark.usefixtures("server_io")  # every test once on each event loop

LIMITS = {"max_positions": 1000, "max_frame_bytes": 65536, "max_response_bytes": 1 << 20, "max_dim": 4096,
          "max_abs_position": 10**9}


@pytest.fixture(scope="module")
def server():
    with table_store() as (_, root), running_server(root, **LIMITS) as srv:
        yield srv


@pytest.fixture
def raw(server):
    with Raw(server.address) as conn:
        yield conn


@pytest.fixture(scope="module")
def sin128_id(server):
    with Client(server.address) as c:
        return c.resolve("sin128").id


def header(length, *, version=1, opcode=Opcode.PING, request_id=7, count=0, aux_len=0, reserved=0):
    return REQUEST.pack(length, version, opcode, 0, 0, request_id, 0, count, aux_len, reserved)


def assert_other_connections_fine(server):
    with Client(server.address) as c:
        assert c.ping(b"fine") == b"fine"


# --- errors that close the connection ----------------------------------------------------

CLOSING = {
    "length below the header": (header(31), Status.BAD_FRAME, "length"),
    "zero length": (header(0), Status.BAD_FRAME, "length"),
    "negative length (0xffffffff)": (header(0xFFFFFFFF), Status.FRAME_TOO_LARGE, "length"),
    "huge length": (header(1 << 30), Status.FRAME_TOO_LARGE, "length"),
    "length one over the limit": (header(65537), Status.FRAME_TOO_LARGE, "length"),
    "length disagrees with count": (header(40, count=2), Status.BAD_FRAME, "length"),
    "length disagrees with aux_len": (header(33, aux_len=5) + b"x", Status.BAD_FRAME, "length"),
    "reserved not zero": (header(32, reserved=1), Status.BAD_FRAME, "reserved"),
    "version 0": (header(32, version=0), Status.BAD_VERSION, "version"),
    "version 2": (header(32, version=2), Status.BAD_VERSION, "version"),
    "opcode 0": (header(32, opcode=0), Status.UNKNOWN_OPCODE, "opcode"),
    "opcode 7": (header(32, opcode=7), Status.UNKNOWN_OPCODE, "opcode"),
    "opcode 255": (header(32, opcode=255), Status.UNKNOWN_OPCODE, "opcode"),
    "an HTTP request": (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", Status.FRAME_TOO_LARGE, "length"),
    "a RESP command": (b"*1\r\n$4\r\nPING\r\n", Status.FRAME_TOO_LARGE, "length"),
    "random garbage": (bytes(np.random.default_rng(1).integers(0, 256, 64, dtype=np.uint8)),
                       Status.FRAME_TOO_LARGE, "length"),
}


@pytest.mark.parametrize("case", sorted(CLOSING))
def test_a_bad_frame_gets_an_error_frame_then_the_connection_closes(server, raw, case):
    data, status, field = CLOSING[case]
    raw.send(data)
    err = raw.error(status)
    assert err.field == field and err.closes
    assert raw.closed()
    assert_other_connections_fine(server)


def test_replies_before_a_bad_frame_are_delivered_first(raw):
    raw.send(frame(Opcode.PING, 1, aux=b"a") + frame(Opcode.PING, 2, aux=b"b") + header(32, version=9, request_id=3))
    assert raw.reply()[1].aux == b"a"
    assert raw.reply()[1].aux == b"b"
    err = raw.error(Status.BAD_VERSION)
    assert err.request_id == 0  # a frame-level error echoes nothing of the bad frame
    assert raw.closed()


@pytest.mark.parametrize("prefix, status", [(struct.pack("<I", 0xFFFFFFFF), Status.FRAME_TOO_LARGE),
                                            (struct.pack("<I", 3), Status.BAD_FRAME),
                                            (struct.pack("<IB", 32, 4), Status.BAD_VERSION),
                                            (struct.pack("<IBB", 32, 1, 99), Status.UNKNOWN_OPCODE)])
def test_a_bad_prefix_is_refused_without_waiting_for_the_rest(raw, prefix, status):
    raw.send(prefix)  # nothing more follows: the server must not wait for it
    raw.error(status)
    assert raw.closed()


def test_a_stream_ending_inside_a_frame_is_reported(raw):
    whole = frame(Opcode.ENCODE_TABLE, 5, positions=positions_bytes([1, 2]), count=2, table_id=1)
    raw.send(frame(Opcode.PING, 4) + whole[:-3])
    raw.sock.shutdown(1)  # SHUT_WR: the client is done sending
    assert raw.reply()[1].opcode == Opcode.PING  # the complete request is still answered
    err = raw.error(Status.BAD_FRAME)
    assert "ended" in str(err)
    assert raw.closed()


@pytest.mark.parametrize("sent, text", [(1, "1 byte of a frame header"), (3, "3 bytes of a frame header"),
                                        (4, "4 of the 48 bytes of a frame"), (47, "47 of the 48 bytes of a frame")])
def test_eof_inside_the_length_or_the_frame_says_how_much_arrived(raw, sent, text):
    """docs/protocol.md, Errors: the exact BAD_FRAME text at EOF, inside the 4-byte length too."""
    whole = frame(Opcode.ENCODE_TABLE, 5, positions=positions_bytes([1, 2]), count=2, table_id=1)
    assert len(whole) == 48
    raw.send(whole[:sent])
    raw.sock.shutdown(1)
    err = raw.error(Status.BAD_FRAME)
    assert str(err) == f"length: the stream ended after {text}" and "unanswered" not in str(err)
    assert raw.closed()


@pytest.mark.parametrize("case", ["length below the header", "version 2", "opcode 7", "huge length"])
def test_frame_level_errors_carry_no_unanswered_count(raw, case):
    """docs/protocol.md: only SHUTTING_DOWN and IDLE_TIMEOUT end with "unanswered: ..."."""
    data, status, _ = CLOSING[case]
    raw.send(frame(Opcode.PING, 1) + data)
    raw.reply()
    assert "unanswered" not in str(raw.error(status))


def test_a_client_vanishing_mid_frame_costs_only_its_connection(server):
    for _ in range(20):
        with Raw(server.address) as conn:
            conn.send(header(1000, count=(1000 - 32) // 8 - 1, aux_len=8)[:20])
    with Client(server.address) as c:  # all 20 are released once the server sees them close: only c is left
        assert settled(lambda: c.stats()["connections"]["open"]) == 1
    assert_other_connections_fine(server)


# --- errors that answer one request -------------------------------------------------------

def encode_table(table_id, positions, *, dtype=WireDtype.FLOAT32, kind=PositionKind.INT64, request_id=9):
    dt = "<i8" if kind == PositionKind.INT64 else "<f8"
    return frame(Opcode.ENCODE_TABLE, request_id, positions=positions_bytes(positions, dt), count=len(positions),
                 table_id=table_id, dtype=dtype, position_kind=kind)


def vaswani(dim=8, **prefix):
    """An inline-spec aux block for a Vaswani sinusoid, with prefix fields replaced."""
    aux = bytearray(sinusoidal_aux(posenc.SinusoidalSpec(dim)))
    fields = dict(zip(["n_freq", "row_width", "sin_base", "cos_base", "n_cos", "flags", "amplitude"],
                      SPEC_PREFIX.unpack_from(aux)))
    fields.update(prefix)
    SPEC_PREFIX.pack_into(aux, 0, *fields.values())
    return bytes(aux)


def encode_spec(aux, positions=(1,), *, kind=PositionKind.INT64, dtype=WireDtype.FLOAT32):
    dt = "<i8" if kind == PositionKind.INT64 else "<f8"
    return frame(Opcode.ENCODE_SPEC, 11, aux=aux, positions=positions_bytes(list(positions), dt),
                 count=len(positions), dtype=dtype, position_kind=kind)


def request_errors(sin128_id):
    nan, inf = float("nan"), float("inf")
    f64 = PositionKind.FLOAT64
    return {
        "too many positions": (encode_table(sin128_id, [1] * 1001), Status.TOO_MANY_POSITIONS, "count"),
        "output over the response limit": (encode_spec(vaswani(4096), [1] * 65), Status.OUTPUT_TOO_LARGE, "count"),
        "unknown table id": (encode_table(999, [1]), Status.UNKNOWN_TABLE, "table_id"),
        "table id 0": (encode_table(0, [1]), Status.UNKNOWN_TABLE, "table_id"),
        "unknown table name": (frame(Opcode.RESOLVE, aux=b"no-such-table"), Status.UNKNOWN_TABLE, "name"),
        "table name with a slash": (frame(Opcode.RESOLVE, aux=b"../etc"), Status.BAD_ARGUMENT, "name"),
        "table name with a NUL": (frame(Opcode.RESOLVE, aux=b"sin\x00128"), Status.BAD_ARGUMENT, "name"),
        "empty table name": (frame(Opcode.RESOLVE), Status.BAD_ARGUMENT, "name"),
        "table name too long": (frame(Opcode.RESOLVE, aux=b"a" * 65), Status.BAD_ARGUMENT, "name"),
        "position past the table": (encode_table(sin128_id, [0, 4096]), Status.POSITION_OUT_OF_RANGE, "positions"),
        "negative position": (encode_table(sin128_id, [-1]), Status.POSITION_OUT_OF_RANGE, "positions"),
        "int64 minimum": (encode_table(sin128_id, [-(2**63)]), Status.POSITION_OUT_OF_RANGE, "positions"),
        "fractional table position": (encode_table(sin128_id, [1.5], kind=f64), Status.POSITION_OUT_OF_RANGE,
                                      "positions"),
        "NaN table position": (encode_table(sin128_id, [nan], kind=f64), Status.POSITION_OUT_OF_RANGE, "positions"),
        "NaN spec position": (encode_spec(vaswani(), [nan], kind=f64), Status.POSITION_OUT_OF_RANGE, "positions"),
        "infinite spec position": (encode_spec(vaswani(), [inf], kind=f64), Status.POSITION_OUT_OF_RANGE,
                                   "positions"),
        "spec position over the bound": (encode_spec(vaswani(), [2e9], kind=f64), Status.POSITION_OUT_OF_RANGE,
                                         "positions"),
        "bad dtype": (encode_table(sin128_id, [1], dtype=4), Status.BAD_ARGUMENT, "dtype"),
        "bad position kind": (encode_table(sin128_id, [1], kind=2), Status.BAD_ARGUMENT, "position_kind"),
        "positions on PING": (frame(Opcode.PING, positions=positions_bytes([1]), count=1), Status.BAD_ARGUMENT,
                              "count"),
        "aux on STATS": (frame(Opcode.STATS, aux=b"x"), Status.BAD_ARGUMENT, "aux_len"),
        "aux on ENCODE_TABLE": (frame(Opcode.ENCODE_TABLE, aux=b"x", table_id=sin128_id), Status.BAD_ARGUMENT,
                                "aux_len"),
        "spec shorter than its prefix": (encode_spec(b"\x01" * 31), Status.BAD_ARGUMENT, "spec.aux_len"),
        "spec with unknown flags": (encode_spec(vaswani(flags=8)), Status.BAD_ARGUMENT, "spec.flags"),
        "spec width 0": (encode_spec(vaswani(row_width=0)), Status.BAD_ARGUMENT, "spec.row_width"),
        "spec width over max-dim": (encode_spec(vaswani(row_width=5000)), Status.BAD_ARGUMENT, "spec.row_width"),
        "spec without frequencies": (encode_spec(vaswani(n_freq=0)), Status.BAD_ARGUMENT, "spec.n_freq"),
        "spec n_cos over n_freq": (encode_spec(vaswani(n_cos=5)), Status.BAD_ARGUMENT, "spec.n_cos"),
        "spec columns not covering the row": (encode_spec(vaswani(row_width=9)), Status.BAD_ARGUMENT,
                                              "spec.row_width"),
        "interleaved spec with a base": (encode_spec(vaswani(sin_base=1)), Status.BAD_ARGUMENT, "spec.sin_base"),
        "blocks past the row": (encode_spec(vaswani(flags=0, sin_base=0, cos_base=5)), Status.BAD_ARGUMENT,
                                "spec.cos_base"),
        "overlapping blocks": (encode_spec(vaswani(flags=0, sin_base=0, cos_base=2)), Status.BAD_ARGUMENT,
                               "spec.cos_base"),
        "spec aux length off": (encode_spec(vaswani() + b"\0" * 8), Status.BAD_ARGUMENT, "spec.aux_len"),
        "non-finite amplitude": (encode_spec(vaswani(amplitude=float("inf"))), Status.BAD_ARGUMENT,
                                 "spec.amplitude"),
        "NaN frequency": (encode_spec(vaswani()[:40] + struct.pack("<d", nan) + vaswani()[48:]), Status.BAD_ARGUMENT,
                          "spec.freqs"),
        "scale flag without scales": (encode_spec(vaswani(flags=SpecFlag.INTERLEAVED | SpecFlag.COLUMN_SCALE)),
                                      Status.BAD_ARGUMENT, "spec.aux_len"),
    }


def test_each_request_error_names_its_field_and_keeps_the_connection(server, sin128_id):
    cases = request_errors(sin128_id)
    with Raw(server.address) as conn:
        for name, (data, status, field) in cases.items():
            conn.send(data)
            err = conn.error(status)
            assert err.field == field, (name, str(err))
            assert not err.closes and len(str(err)) > len(field) + 5, name
        conn.send(frame(Opcode.PING, 77, aux=b"alive"))
        request_id, reply = conn.reply()
        assert request_id == 77 and reply.aux == b"alive"


def test_request_errors_are_counted_by_code(server, sin128_id):
    with Client(server.address) as c:
        before = c.stats()["errors"]
        with pytest.raises(ServerError):
            c.encode(sin128_id, [5000])
        with pytest.raises(ServerError):
            c.encode(4000, [1])
        after = c.stats()["errors"]
    assert after["position_out_of_range"] == before["position_out_of_range"] + 1
    assert after["unknown_table"] == before["unknown_table"] + 1


def test_the_connection_limit_refuses_with_an_error_frame():
    with table_store({}) as (_, root), running_server(root, threads=1, max_connections=2) as srv:
        with Raw(srv.address) as a, Raw(srv.address) as b:
            for conn in (a, b):  # both admitted
                conn.send(frame(Opcode.PING))
                assert conn.reply() is not None
            with Raw(srv.address) as third:
                err = third.error(Status.TOO_MANY_CONNECTIONS)
                assert err.field == "connections" and third.closed()
        for _ in range(500):  # once the server has seen them close, new connections are admitted again
            try:
                with Client(srv.address) as c:
                    stats = c.stats()
                break
            except ServerError:
                time.sleep(0.01)
        assert stats["connections"]["open"] == 1 and stats["connections"]["rejected"] >= 1


def test_idle_connections_are_told_then_closed():
    with table_store({}) as (_, root), running_server(root, threads=1, idle_timeout_ms=200) as srv:
        with Raw(srv.address, timeout=10) as silent, Raw(srv.address, timeout=10) as mid_frame:
            mid_frame.send(header(1000, count=(1000 - 32) // 8)[:20])
            # silent: told by the server after ~0.2 s, well before the 10 s timeout, then EOF
            err = silent.error(Status.IDLE_TIMEOUT)
            assert err.field == "connection" and err.closes and "--idle-timeout-ms" in str(err)
            assert str(err).endswith("unanswered: nothing") and silent.closed()
            err = mid_frame.error(Status.IDLE_TIMEOUT)
            assert str(err).endswith("unanswered: 20 of the 1000 bytes of a frame") and mid_frame.closed()
        with Client(srv.address) as c:
            stats = c.stats()
    assert stats["connections"]["idle_closed"] == 2 and stats["errors"]["idle_timeout"] == 2


def test_the_idle_close_comes_no_earlier_than_the_timeout_and_at_most_250_ms_later():
    """docs/protocol.md, Server behaviour: each worker checks idleness every 250 ms of its loop.
    Connections go quiet at staggered moments, so each lands at another point of that cycle."""
    import threading

    idle_ms, delays = 600, []
    with table_store({}) as (_, root), running_server(root, threads=1, idle_timeout_ms=idle_ms) as srv:
        def one():
            with Raw(srv.address, timeout=10) as r:
                r.send(frame(Opcode.PING, 7))
                r.reply()
                quiet = time.monotonic()  # the last traffic either way: our read of the reply
                r.error(Status.IDLE_TIMEOUT)
                delays.append(time.monotonic() - quiet)

        threads = [threading.Thread(target=one) for _ in range(6)]
        for thread in threads:
            thread.start()
            time.sleep(0.043)
        for thread in threads:
            thread.join()
    assert len(delays) == 6
    assert min(delays) >= idle_ms / 1000 - 0.005, delays  # the reply left the server just before we read it
    assert max(delays) <= idle_ms / 1000 + 0.25 + 0.1, delays  # 0.1 s for this test's own scheduling


def test_a_client_that_does_not_read_is_held_to_bounded_memory():
    rows_per_request, n_requests = 256, 400  # 128 KiB per reply, 50 MiB in all
    request = frame(Opcode.ENCODE_TABLE, 1, positions=positions_bytes(np.arange(rows_per_request)),
                    count=rows_per_request, table_id=1)
    with table_store() as (_, root), running_server(root, threads=1) as srv, Client(srv.address) as other:
        assert other.resolve("sin128").id == 1
        rss_before = rss_kib(srv.pid)
        with Raw(srv.address, timeout=20) as greedy:
            greedy.send(request * n_requests)  # fits in the socket buffers; no reply is read yet
            answered = settled(lambda: other.stats()["requests"]["encode_table"])
            assert answered < n_requests, "the server kept reading a client that does not read"
            growth = rss_kib(srv.pid) - rss_before
            assert growth < 16 * 1024, f"server grew by {growth} KiB"
            assert other.ping(b"x") == b"x"  # the same thread still serves others
            for _ in range(n_requests):  # once the client reads, every request is answered in order
                assert greedy.reply()[1].rows == rows_per_request


def settled(read, quiet_s=0.3, limit_s=10.0):
    """read() once it has returned the same value for quiet_s (at most limit_s)."""
    deadline = time.monotonic() + limit_s
    value, since = read(), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        now = read()
        if now != value:
            value, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            break
    return value


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def test_a_second_server_on_a_busy_port_refuses_to_start():
    """SO_REUSEPORT would let it share the port silently, splitting connections between the two."""
    with table_store({}) as (_, root), running_server(root, threads=1) as first:
        port = int(first.tcp_address.rpartition(":")[2])
        with pytest.raises(PosencError, match="Address already in use"):
            start_server(port=port, shm_dir=str(root))
        with Client(first.address) as c:
            assert c.ping(b"still") == b"still"


def test_out_of_file_descriptors_clients_are_refused_not_left_hanging():
    with table_store({}) as (_, root), tempfile.TemporaryDirectory() as tmp:
        argv = ["prlimit", "--nofile=32:32", *server_argv(port=0, unix_path=f"{tmp}/s", shm_dir=str(root), threads=1)]
        srv = ServerProcess(argv)
        try:
            conns = [Raw(srv.address) for _ in range(40)]
            outcomes = []
            for conn in conns:
                conn.send(frame(Opcode.PING, aux=b"p"))
                got = conn.reply()
                outcomes.append("ok" if got and not isinstance(got[1], ServerError) else got[1].status)
            assert outcomes.count("ok") >= 20 and Status.TOO_MANY_CONNECTIONS in outcomes, outcomes
            for conn in conns:
                conn.close()
            cpu_before = cpu_seconds(srv.pid)
            time.sleep(0.5)
            assert cpu_seconds(srv.pid) - cpu_before < 0.2  # not spinning on a listener it cannot serve
            with Client(srv.address) as c:
                assert c.ping(b"again") == b"again"
        finally:
            srv.stop()


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
