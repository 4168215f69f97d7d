"""The binary server end to end: rows from published tables and from inline specs against the
float64 oracle, every operation, both sockets, the sync and asyncio clients, pipelining, and
tables that are replaced, removed or corrupted while the server runs."""

import asyncio

import numpy as np
import posenc
import pytest
from binary_support import TABLES, running_server, server, server_io, store_and_root, tables  # noqa: F401 (fixtures)
from conftest import DTYPES, assert_matches_oracle, hf_config
from posenc import reference
from posenc.client import AsyncClient, Client, ServerError, Status
from posenc.dtypes import OUTPUT_DTYPES
from posenc.tables import TableSpec
from shm_support import oracle_rows, poke

pytestmark = pytest.mark.usefixtures("server_io")  # every test once on each event loop

RNG = np.random.default_rng(6)


@pytest.fixture
def client(server):
    with Client(server.address) as c:
        yield c


def table_positions(table, n=40):
    """Both ends, zero when inside, and random rows."""
    edges = [table.start, table.stop - 1] + ([0] if table.start <= 0 < table.stop else [])
    return np.concatenate([edges, RNG.integers(table.start, table.stop, n)]).astype(np.int64)


@pytest.mark.parametrize("name", sorted(TABLES))
@pytest.mark.parametrize("dtype", DTYPES)
def test_table_rows_match_the_oracle(client, name, dtype):
    table = TABLES[name]
    positions = table_positions(table)
    if table.dtype == "float32" and dtype in ("float16", "bfloat16"):  # would round twice: refused
        with pytest.raises(ServerError, match="rounded twice"):
            client.encode(name, positions, dtype=dtype)
        return
    rows = client.encode(name, positions, dtype=dtype)
    assert rows.shape == (len(positions), table.width) and rows.dtype == OUTPUT_DTYPES[dtype]
    # float64 rows of a float32 table carry float32 values: judge them at float32's tolerance
    judged_as = table.dtype if dtype == "float64" else dtype
    assert_matches_oracle(rows, oracle_rows(table, positions), judged_as,
                          angle_max=float(max(abs(table.start), abs(table.stop))))


def test_table_rows_equal_the_published_rows_bit_for_bit(client, store_and_root):
    _, root = store_and_root
    positions = table_positions(TABLES["sin128"], 100)
    with posenc.shm.attach("sin128", root=root) as table:
        expected = table.lookup(positions)
    assert np.array_equal(client.encode("sin128", positions), expected)


def test_float_positions_address_table_rows(client):
    assert np.array_equal(client.encode("sin128", [3.0, 17.0]), client.encode("sin128", [3, 17]))


SINUSOIDAL_SPECS = [
    posenc.SinusoidalSpec(128),
    posenc.SinusoidalSpec(7),
    posenc.SinusoidalSpec(64, layout="halves", base=500.0),
    posenc.SinusoidalSpec(9, layout="halves"),
    posenc.SinusoidalSpec(32, layout="t2t", min_timescale=2.0, max_timescale=1e5),
    posenc.SinusoidalSpec(33, layout="t2t"),
]


@pytest.mark.parametrize("spec", SINUSOIDAL_SPECS, ids=lambda s: f"{s.layout}-{s.dim}")
@pytest.mark.parametrize("dtype", DTYPES)
def test_inline_sinusoidal_specs_match_the_oracle(client, spec, dtype):
    positions = np.concatenate([[0.0, 0.5, 1.25, -3.0, 65535.0, 1e6], RNG.uniform(-1e4, 1e5, 30)])
    rows = client.encode_spec(spec, positions, dtype=dtype)
    expected = reference.sinusoidal(positions, spec.dim, base=spec.base, layout=spec.layout,
                                    min_timescale=spec.min_timescale, max_timescale=spec.max_timescale)
    assert_matches_oracle(rows, expected, dtype, angle_max=1e6)


def test_inline_spec_scale_and_target_std(client):
    scale = RNG.uniform(0.5, 2.0, 16)
    spec = posenc.SinusoidalSpec(16, scale=scale, target_std=0.02)
    positions = np.arange(0, 300, 7)
    expected = posenc.sinusoidal(positions, 16, scale=scale, target_std=0.02, dtype="float64")
    assert_matches_oracle(client.encode_spec(spec, positions, dtype="float64"), expected, "float64",
                          amplitude=float(np.abs(expected).max()), angle_max=300)


def test_inline_spec_offset_shifts_the_positions(client):
    """M2M100-style offset: the client sends p + offset, so rows equal the library's."""
    spec = posenc.SinusoidalSpec(16, layout="t2t", offset=2)
    positions = np.arange(0, 50)
    expected = posenc.sinusoidal(positions + 2, 16, layout="t2t", dtype="float64")
    assert_matches_oracle(client.encode_spec(spec, positions, dtype="float64"), expected, "float64", angle_max=52)


ROPE_SPECS = {
    "default": posenc.RopeSpec(64),
    "partial-neox": posenc.RopeSpec.from_hf_config(hf_config("gpt-neox-20b")),
    "llama3": posenc.RopeSpec.from_hf_config(hf_config("llama-3.1-8b")),
    "yarn": posenc.RopeSpec.from_hf_config(hf_config("qwen2-7b-yarn")),
    "longrope": posenc.RopeSpec.from_hf_config(hf_config("phi-3-mini-128k")),
}


@pytest.mark.parametrize("name", sorted(ROPE_SPECS))
@pytest.mark.parametrize("seq_len", [None, 200000])
def test_inline_rope_specs_match_the_oracle(client, name, seq_len):
    spec = ROPE_SPECS[name]
    positions = np.concatenate([[0, 1, 4095, 131071], RNG.integers(0, 150000, 20)])
    rows = client.encode_spec(spec, positions, seq_len=seq_len)
    used = seq_len if seq_len is not None else (float(positions.max()) + 1 if spec.length_dependent else None)
    inv_freq, attention = spec.inv_freq(used)
    cos, sin = reference.rope_cos_sin(positions, inv_freq, attention)
    assert_matches_oracle(rows, np.concatenate([cos, sin], axis=1), "float32", amplitude=max(attention, 1.0),
                          angle_max=150000)


def test_ping_echoes_its_payload(client):
    assert client.ping(b"\x00hello\xff") == b"\x00hello\xff"
    assert client.ping() == b""


def test_resolve_describes_the_table(client, store_and_root):
    ref = client.resolve("llama3.1")
    table = TABLES["llama3.1"]
    assert (ref.width, ref.dtype, ref.start, ref.stop, ref.rows) == (table.width, "float64", 0, 2048, 2048)
    assert ref.spec == table.to_dict() and ref.id >= 1
    assert client.resolve("llama3.1").id == ref.id  # stable


def test_list_tables_gives_every_table_with_its_id(client):
    listed = {t["name"]: t for t in client.list_tables()}
    assert set(listed) == set(TABLES)
    assert listed["sin128"]["id"] == client.resolve("sin128").id
    assert listed["t2t-33"]["start"] == -100 and listed["t2t-33"]["width"] == 33


def test_stats_counts_requests_and_reports_limits(server):
    with Client(server.address) as c:
        before = c.stats()
        c.encode("sin128", [1, 2, 3])
        with pytest.raises(ServerError):
            c.encode("sin128", [99999])
        after = c.stats()
    assert after["requests"]["encode_table"] - before["requests"]["encode_table"] == 2
    assert after["errors"]["position_out_of_range"] - before["errors"]["position_out_of_range"] == 1
    assert after["positions"] - before["positions"] == 3
    assert after["connections"]["open"] >= 1 and after["threads"] == server.threads == 2
    assert after["limits"]["max_positions"] == 65536 and after["limits"]["max_frame_bytes"] == 2 << 20
    assert after["isa"] in ("scalar", "avx2", "avx512")


def test_fetch_stats_is_one_call(server):
    stats = posenc.client.fetch_stats(server.address)
    assert stats["server"] == "posenc-server" and stats["protocol"] == 1


def test_unix_socket_serves_the_same_rows(server):
    with Client(server.unix_address) as via_unix, Client(server.address) as via_tcp:
        assert np.array_equal(via_unix.encode("sin128", [5, 6]), via_tcp.encode("sin128", [5, 6]))


def test_a_pipeline_keeps_order_and_reports_errors_in_place(client):
    pipe = client.pipeline()
    for p in range(100):
        pipe.encode("sin128", [p])
    pipe.encode("sin128", [-1])  # out of range: an error, the connection stays
    pipe.ping(b"end")
    results = pipe.execute(raise_on_error=False)
    expected = client.encode("sin128", np.arange(100))
    assert all(np.array_equal(results[p][0], expected[p]) for p in range(100))
    assert isinstance(results[100], ServerError) and results[100].status == Status.POSITION_OUT_OF_RANGE
    assert results[101] == b"end"
    with pytest.raises(ServerError, match="positions"):
        client.pipeline().encode("sin128", [5000]).execute()
    assert client.ping(b"still") == b"still"


def test_a_pipeline_larger_than_the_socket_buffers_goes_out_in_windows(client):
    spec, positions = posenc.RopeSpec(2), np.arange(512)  # 4 KiB of positions, 2 KiB of rows per request
    pipe = client.pipeline()
    for _ in range(3000):  # 12 MiB of requests: twelve windows
        pipe.encode_spec(spec, positions, dtype="float16")
    results = pipe.execute()
    assert len(results) == 3000 and all(np.array_equal(r, results[0]) for r in results)
    assert results[0].shape == (512, 2)


def test_async_client_pipelines_concurrent_calls(server):
    async def main():
        async with await AsyncClient.connect(server.address) as c:
            rows = await asyncio.gather(*(c.encode("sin128", [p]) for p in range(300)))
            spec_rows = await c.encode_spec(posenc.SinusoidalSpec(128), np.arange(300))
            bad = await asyncio.gather(c.encode("sin128", [10**6]), return_exceptions=True)
            return np.concatenate(rows), spec_rows, bad[0], await c.ping(b"ok")

    rows, spec_rows, bad, pong = asyncio.run(main())
    assert_matches_oracle(rows, spec_rows, "float32")
    assert isinstance(bad, ServerError) and bad.field == "positions" and pong == b"ok"


def test_replaced_table_is_served_at_its_new_generation(server, store_and_root):
    store, _ = store_and_root
    with Client(server.address) as c:
        store.publish("swap", TABLES["sin128"])
        first = c.resolve("swap")
        old = c.encode("swap", [10])
        store.publish("swap", TableSpec(posenc.SinusoidalSpec(128, base=77.0), 0, 64))
        second = c.resolve("swap")  # a RESOLVE checks the generation at once
        assert second.id == first.id and second.generation > first.generation and second.stop == 64
        new = c.encode(first.id, [10])
    assert not np.array_equal(old, new)
    assert_matches_oracle(new, reference.sinusoidal([10], 128, base=77.0), "float32")


def test_removed_table_answers_unknown_table(server, store_and_root):
    store, _ = store_and_root
    with Client(server.address) as c:
        store.publish("gone", TABLES["sin128"])
        ref = c.resolve("gone")
        store.remove("gone")
        with pytest.raises(ServerError) as err:
            c.resolve("gone")
        assert err.value.status == Status.UNKNOWN_TABLE and err.value.field == "name"
        with pytest.raises(ServerError) as err:
            c.encode(ref.id, [1])
        assert err.value.status == Status.UNKNOWN_TABLE and err.value.field == "table_id"


def test_corrupted_table_is_refused_not_served(server, store_and_root):
    store, root = store_and_root
    info = store.publish("corrupt", TABLES["sin128"])
    poke(root / info.segment, info.nbytes // 2 + 4096, b"\x01\x02\x03\x04")  # inside the data
    with Client(server.address) as c, pytest.raises(ServerError) as err:
        c.resolve("corrupt")
    assert err.value.status == Status.TABLE_UNAVAILABLE and "checksum" in str(err.value)
