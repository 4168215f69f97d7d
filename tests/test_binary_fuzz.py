"""Fuzzing the frame parser and request handlers, bounded in time:

* the libFuzzer target native/server/fuzz_target.c under ASan + UBSan (clang's coverage-guided
  libFuzzer when clang is installed, else the same target under a mutation driver), seeded
  with one valid frame of every operation;
* hypothesis byte streams (valid frames, mutated, truncated, concatenated, random) against a
  running server: every reply must be a well-formed frame and the server must stay up."""

import socket
import subprocess

import numpy as np
import posenc
import pytest
from binary_support import BUILD, ROOT, Raw, running_server, server_io, table_store  # noqa: F401 (fixtures)
from conftest import by_profile
from hypothesis import given, settings
from hypothesis import strategies as st
from posenc.client import Client, calls
from posenc.client.protocol import HEADER_SIZE, parse_header
from posenc.tables import TableSpec

FUZZ_SECONDS = by_profile(10, 300)  # -max_total_time of the sanitizer run (thorough profile: 5 min)


def seed_frames() -> list[bytes]:
    """One valid request of every kind (table id 1 is the table "fuzz", 2 the computed "fuzz-any")."""
    return [
        calls.ping(b"seed").frame(1),
        calls.stats().frame(2),
        calls.list_tables().frame(3),
        calls.resolve("fuzz").frame(4),
        calls.encode_table(1, [-4, 0, 59], "float16").frame(5),
        calls.encode_table(1, np.array([1.0, 2.0]), "float64").frame(6),
        calls.encode_table(2, [-4, 0, 1_700_000_000_123], "bfloat16").frame(10),
        calls.encode_table(2, np.array([0.5, -3.25]), "float64").frame(11),
        calls.encode_spec(posenc.SinusoidalSpec(7, layout="t2t"), [0.5, 3.0]).frame(7),
        calls.encode_spec(posenc.SinusoidalSpec(6, scale=np.ones(6)), [1, 2], "bfloat16").frame(8),
        calls.encode_spec(posenc.RopeSpec(16), [1, 2, 3]).frame(9),
    ]


@pytest.fixture(scope="module")
def fuzz_tables():
    tables = {"fuzz": TableSpec(posenc.SinusoidalSpec(8), -4, 60),
              "fuzz-any": TableSpec(posenc.SinusoidalSpec(7, layout="t2t", offset=2), -2**40, 2**40, computed=True)}
    with table_store(tables) as (_, root):
        yield root


def test_fuzz_target_runs_clean_under_sanitizers(fuzz_tables, tmp_path):
    subprocess.run(["make", "-s", "-C", str(ROOT / "native" / "server"), "fuzz"], check=True)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    frames = seed_frames()
    for i, f in enumerate(frames):
        (corpus / f"seed-{i}").write_bytes(b"\x00" + f)  # byte 0: feed the whole stream at once
    (corpus / "pipelined").write_bytes(b"\x05" + b"".join(frames))  # 5-byte chunks
    result = subprocess.run([str(BUILD / "posenc-fuzz"), f"-max_total_time={FUZZ_SECONDS}", "-timeout=10",
                             "-rss_limit_mb=2048", "-print_final_stats=1", str(corpus)], check=False,
                            env={"POSENC_FUZZ_SHM_DIR": str(fuzz_tables), "ASAN_OPTIONS": "detect_leaks=1"},
                            capture_output=True, text=True, timeout=FUZZ_SECONDS + 120)
    assert result.returncode == 0, result.stderr[-4000:] + result.stdout[-2000:]
    assert "Done" in result.stdout + result.stderr


@pytest.fixture(scope="module")
def server(fuzz_tables, server_io):
    """The fuzzed server, once on each event loop."""
    with running_server(fuzz_tables, threads=2, max_positions=256, max_frame_bytes=16384, max_dim=512) as srv:
        with Client(srv.address) as c:
            c.resolve("fuzz")
            c.resolve("fuzz-any")
        yield srv


def mutated(data: bytes, edits) -> bytes:
    buf = bytearray(data)
    for at, value in edits:
        if buf:
            buf[at % len(buf)] = value
    return bytes(buf)


streams = st.one_of(
    st.binary(max_size=200),
    st.builds(mutated, st.sampled_from(seed_frames()), st.lists(st.tuples(st.integers(0, 10**4), st.integers(0, 255)),
                                                                   max_size=6)),
    st.builds(lambda frames, cut: b"".join(frames)[:cut], st.lists(st.sampled_from(seed_frames()), max_size=5),
              st.integers(0, 2000)),
    st.builds(lambda frame, tail: frame + tail, st.sampled_from(seed_frames()), st.binary(max_size=64)),
)


def read_all_replies(conn: Raw) -> int:
    """Read until the server closes; every reply must parse. Returns how many came."""
    n = 0
    while True:
        header = conn._read(HEADER_SIZE)
        if header is None:
            return n
        fields = parse_header(header)  # raises ProtocolError on a malformed reply
        assert conn._read(fields[0] - HEADER_SIZE) is not None
        n += 1


@settings(max_examples=by_profile(250, 5000), deadline=None)
@given(data=streams)
def test_any_byte_stream_gets_well_formed_replies_then_a_close(server, data):
    with Raw(server.address, timeout=10) as conn:
        conn.send(data)
        conn.sock.shutdown(socket.SHUT_WR)  # the server answers what is complete, then closes
        read_all_replies(conn)


def test_the_server_survived_the_fuzzing(server):
    with Client(server.address) as c:
        assert c.ping(b"ok") == b"ok"
        stats = c.stats()
        assert stats["connections"]["open"] == 1 and stats["errors"]["internal"] == 0
