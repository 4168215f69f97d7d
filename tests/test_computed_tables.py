"""Named computed encodings (`TableSpec(..., computed=True)`): a spec registered once under a name and
served like a stored table at every door -- the library (`posenc.shm.attach`), the binary protocol
(RESOLVE / ENCODE_TABLE / LIST_TABLES, no spec on the wire), HTTP (GET and POST rows, PUT, the
listing) and the service config -- for any position in its range, every row bit for bit the library's
for the same spec, position and dtype."""

from __future__ import annotations

import numpy as np
import pytest
from binary_support import running_server, table_store
from fastapi.testclient import TestClient
from shm_support import published_config

import posenc
from posenc.client import Client, ServerError
from posenc.config import ServiceConfig, load
from posenc.dtypes import OUTPUT_DTYPES
from posenc.encodings import AlibiSpec
from posenc.errors import PosencError
from posenc.http import create_app
from posenc.shm import ShmError, attach, list_tables
from posenc.shm import format as shm_format, segment
from posenc.tables import TableSpec

pytest_plugins = ["shm_support"]

LIMIT = 1 << 53
DTYPES = tuple(OUTPUT_DTYPES)  # float32, float16, bfloat16, float64
LLAMA3 = posenc.RopeSpec(128, base=500000.0, max_position_embeddings=131072, scaling={
    "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192})
YARN = posenc.RopeSpec(64, base=10000.0, max_position_embeddings=32768, scaling={
    "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8192})
LONGROPE = posenc.RopeSpec(8, base=10000.0, max_position_embeddings=4096, original_max_position_embeddings=1024,
                           scaling={"rope_type": "longrope", "short_factor": [1.0, 1.5, 2.0, 2.5],
                                    "long_factor": [2.0, 3.0, 4.0, 5.0]})
#: One of each shape of spec the server's inline form has to carry: interleaved, halves, t2t with its
#: zero column, a position offset, per-column scales (float32's second rounding), and RoPE variants
#: with an attention factor, at init frequencies and at a fixed seq_len.
with pytest.MonkeyPatch.context() as _limit:  # specs are checked against the limit when made
    _limit.setattr(posenc.LIMITS, "max_abs_position", LIMIT)
    TABLES = {
        "sin128": TableSpec(posenc.SinusoidalSpec(128), -LIMIT, LIMIT + 1, computed=True),
        "halves-7": TableSpec(posenc.SinusoidalSpec(7, layout="halves"), -LIMIT, LIMIT + 1, computed=True),
        "t2t-9-offset": TableSpec(posenc.SinusoidalSpec(9, layout="t2t", offset=2), 0, 1 << 40, computed=True,
                                  dtype="float64"),
        "scaled-4": TableSpec(posenc.SinusoidalSpec(4, scale=[0.5, -3.0, 1.25, 7.0]), 0, LIMIT + 1, computed=True),
        "llama3": TableSpec(LLAMA3, 0, LIMIT + 1, computed=True),
        "yarn": TableSpec(YARN, 0, LIMIT + 1, computed=True),
        "longrope-long": TableSpec(LONGROPE, 0, LIMIT + 1, seq_len=5000.0, computed=True),
    }
POSITIONS = [0, 1, 17, 4095, 131071, 1_700_000_000_123, 1_799_999_999_999, (1 << 40) - 1]


def library_rows(table: TableSpec, positions, dtype: str) -> np.ndarray:
    """The library's own rows for the table's spec (its public functions, not the table code)."""
    enc = table.encoding
    if table.kind == "sinusoidal":
        return posenc.sinusoidal(positions, enc.dim, base=enc.base, layout=enc.layout, scale=enc.scale,
                                 offset=enc.offset, dtype=dtype)
    cos, sin = posenc.rope_cos_sin(positions, enc, seq_len=table.seq_len, dtype=dtype)
    return np.concatenate([cos, sin], axis=1)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def positions_for(table: TableSpec) -> list:
    inside = [p for p in POSITIONS if table.start <= p < table.stop]
    return inside + ([-(1 << 52) - 3, -12345] if table.start < 0 else []) + [2.5, 1e9 + 0.25]


@pytest.fixture(autouse=True)
def whole_limit(monkeypatch):
    monkeypatch.setattr(posenc.LIMITS, "max_abs_position", LIMIT)


@pytest.fixture(scope="module")
def published():
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(posenc.LIMITS, "max_abs_position", LIMIT)
        with table_store(TABLES) as (store, root):
            yield store, root


# --- the library ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", TABLES)
def test_library_rows_are_the_library_functions_rows(published, name):
    table = TABLES[name]
    positions = positions_for(table)
    with attach(name, root=published[1]) as tbl:
        assert tbl.computed and tbl.array is None and tbl.spec == table
        assert same_bits(tbl.lookup(positions), library_rows(table, positions, table.dtype))
        for dtype in DTYPES:
            assert same_bits(tbl.rows(positions, OUTPUT_DTYPES[dtype]), library_rows(table, positions, dtype)), dtype
        out = np.empty((len(positions), table.width), table.np_dtype)
        assert tbl.lookup(positions, out=out) is out


def test_a_computed_table_stores_its_spec_not_its_rows(published):
    infos = {info.name: info for info in list_tables(published[1])}
    info = infos["sin128"]
    assert info.computed and info.state == "READY" and info.dtype == "float32"
    assert info.shape == (2 * LIMIT + 1, 128) and info.nbytes < 1024
    assert "computed on request" in info.serves
    assert not any(table.computed for table in [TableSpec(posenc.SinusoidalSpec(8), 0, 4)])
    # a stored table's JSON (and hash) does not change: `computed` is written only when true
    assert "computed" not in TableSpec(posenc.SinusoidalSpec(8), 0, 4).to_dict()
    assert TableSpec.from_dict(TABLES["sin128"].to_dict()) == TABLES["sin128"]


def test_positions_outside_the_range_are_refused_naming_them(published):
    with attach("t2t-9-offset", root=published[1]) as tbl:
        for bad in ([-1], [1 << 40], [float("nan")], [float("inf")]):
            with pytest.raises(PosencError) as info:
                tbl.lookup(bad)
            assert info.value.field == "positions"
        with pytest.raises(PosencError, match="out"):
            tbl.lookup([1, 2], out=np.empty((2, 9), np.float32))
    with attach("sin128", root=published[1]) as tbl:
        with pytest.raises(PosencError, match="positions"):
            tbl.lookup(np.array([LIMIT + 1], np.int64))  # not rounded to 2**53 on the way in
    tbl.close()
    with pytest.raises(ShmError, match="closed"):
        tbl.lookup([1])


def test_only_sin_cos_kinds_can_be_computed():
    with pytest.raises(PosencError) as info:
        TableSpec(AlibiSpec(8), 0, 10, computed=True)
    assert info.value.field == "computed" and "alibi" in info.value.message
    for value in ("yes", 1, None):
        with pytest.raises(PosencError) as info:
            TableSpec.from_dict({"encoding": {"kind": "sinusoidal", "dim": 8}, "stop": 4, "computed": value})
        assert info.value.field == "computed"
    with pytest.raises(PosencError) as info:
        TableSpec.from_dict({"encoding": {"kind": "sinusoidal", "dim": 8}})
    assert info.value.field == "stop"
    whole = TableSpec.from_dict({"encoding": {"kind": "sinusoidal", "dim": 8}, "computed": True})
    assert (whole.start, whole.stop) == (-LIMIT, LIMIT + 1)


def test_a_spec_block_that_disagrees_with_its_spec_is_refused_by_every_reader(shm_root, monkeypatch):
    """A segment whose spec block (what the binary server computes from) is not its spec JSON's: the
    Python reader and the server both refuse it, never serving rows of another spec."""
    store = posenc.shm.TableStore(shm_root)
    wrong = segment.spec_block(TableSpec(posenc.SinusoidalSpec(64), 0, 10, computed=True))
    with monkeypatch.context() as lying:  # the writer puts a 64-wide spec block under a 128-wide spec
        lying.setattr(segment, "spec_block", lambda table: wrong)
        lying.setattr(shm_format, "spec_block", lambda table: wrong)
        store.publish("liar", TableSpec(posenc.SinusoidalSpec(128), 0, 10, computed=True))
    with pytest.raises(ShmError, match="spec block"):
        attach("liar", root=shm_root)
    with running_server(shm_root, threads=1, max_abs_position=LIMIT) as srv, Client(srv.address) as c:
        with pytest.raises(ServerError, match="64 wide") as info:
            c.encode("liar", [1])
        assert info.value.status.name == "TABLE_UNAVAILABLE"
        assert c.encode_spec(posenc.SinusoidalSpec(8), [1]).shape == (1, 8)  # the connection goes on
    store.close()


# --- the binary protocol -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def server(published):
    with running_server(published[1], max_abs_position=LIMIT) as srv:
        yield srv


@pytest.mark.parametrize("name", TABLES)
def test_encode_table_computes_the_library_rows_for_every_dtype(server, name):
    table = TABLES[name]
    positions = positions_for(table)
    with Client(server.address) as c:
        ref = c.resolve(name)
        assert (ref.start, ref.stop, ref.width, ref.dtype) == (table.start, table.stop, table.width, table.dtype)
        assert ref.spec == table.to_dict()
        for dtype in DTYPES:
            assert same_bits(c.encode(name, positions, dtype=dtype), library_rows(table, positions, dtype)), dtype
        ints = [p for p in positions if float(p).is_integer()]
        assert same_bits(c.encode(name, np.array(ints, np.int64)), library_rows(table, ints, "float32"))
        assert c.encode(name, []).shape == (0, table.width)


def test_computed_and_stored_rows_agree(server, published):
    """A computed table and a stored table of the same spec give the same bytes for the same position."""
    store, _ = published
    store.publish("sin128-stored", TableSpec(posenc.SinusoidalSpec(128), 0, 4096))
    with Client(server.address) as c:
        positions = [0, 1, 2047, 4095]
        assert same_bits(c.encode("sin128", positions), c.encode("sin128-stored", positions))


def test_listing_says_which_tables_are_computed(server):
    with Client(server.address) as c:
        listed = {t["name"]: t for t in c.list_tables()}
    for name, table in TABLES.items():
        assert listed[name]["computed"] is True
        assert (listed[name]["start"], listed[name]["stop"]) == (table.start, table.stop)


@pytest.mark.parametrize("positions, message", [
    ([-1], "outside the table's positions [0, 1099511627776)"),
    ([1 << 40], "outside the table's positions"),
    ([float("nan")], "nan"),
    ([(1 << 53) + 1], "9007199254740993"),
])
def test_bad_positions_get_an_error_frame_naming_them(server, positions, message):
    with Client(server.address) as c:
        dtype = "<f8" if isinstance(positions[0], float) else "<i8"
        with pytest.raises(ServerError, match=message.replace("[", r"\[").replace(")", r"\)")) as info:
            c.encode("t2t-9-offset", np.array(positions, dtype=dtype))
        assert info.value.status.name == "POSITION_OUT_OF_RANGE" and info.value.field == "positions"
        assert c.encode("t2t-9-offset", [3]).shape == (1, 9)  # and the connection is still usable


def test_a_replaced_computed_table_serves_its_new_spec(server, published):
    store, _ = published
    store.publish("moving", TableSpec(posenc.SinusoidalSpec(16), 0, LIMIT + 1, computed=True))
    with Client(server.address) as c:
        before = c.encode("moving", [10**12])
        store.publish("moving", TableSpec(posenc.SinusoidalSpec(16, base=500.0), 0, LIMIT + 1, computed=True))
        c.resolve("moving")  # a RESOLVE sees the new generation at once
        after = c.encode("moving", [10**12])
        assert same_bits(before, posenc.sinusoidal([10**12], 16))
        assert same_bits(after, posenc.sinusoidal([10**12], 16, base=500.0))
        store.publish("moving", TableSpec(posenc.SinusoidalSpec(16), 0, 64))  # stored again
        c.resolve("moving")
        assert same_bits(c.encode("moving", [10]), posenc.sinusoidal([10], 16))


# --- HTTP ----------------------------------------------------------------------------------------

KEY = {"Authorization": "Bearer secret"}


def http_config(root: str) -> ServiceConfig:
    return ServiceConfig.from_dict({
        "server": {"shm_dir": root}, "api_key": "secret",
        "tables": [{"name": "pay", "computed": True, "encoding": {"kind": "sinusoidal", "dim": 128}},
                   {"name": "stored", "encoding": {"kind": "sinusoidal", "dim": 128}, "stop": 4096}]})


@pytest.fixture(scope="module")
def http():
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(posenc.LIMITS, "max_abs_position", LIMIT)
        with published_config("posenc-computed-", http_config) as (config, _):
            with TestClient(create_app(config)) as client:
                yield client


def body_rows(response) -> np.ndarray:
    assert response.status_code == 200, response.text
    dtype = np.dtype(OUTPUT_DTYPES[response.headers["x-posenc-dtype"]])
    shape = [int(n) for n in response.headers["x-posenc-shape"].split(",") if n]
    return np.frombuffer(response.content, dtype).reshape(shape)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("position", [0, 4095, 1_700_000_000_123, LIMIT])
def test_http_get_row_is_the_library_row(http, dtype, position):
    query = "" if dtype == "float32" else f"?dtype={dtype}"
    raw = {"Accept": "application/octet-stream"}
    fast = http.get(f"/v1/tables/pay/rows/{position}{query}", headers=raw)
    slow = TestClient(http.app.api).get(f"/v1/tables/pay/rows/{position}{query}", headers=raw)
    assert fast.content == slow.content
    assert same_bits(body_rows(fast), posenc.sinusoidal([position], 128, dtype=dtype)[0])
    as_json = http.get(f"/v1/tables/pay/rows/{position}{query}").json()
    assert as_json["dtype"] == dtype and len(as_json["data"]) == 128


def test_http_post_rows_any_positions(http):
    positions = [-5, 0, 2.5, 1_700_000_000_123]
    r = http.post("/v1/tables/pay/rows", json={"positions": positions, "dtype": "bfloat16"},
                  headers={"Accept": "application/octet-stream"})
    assert same_bits(body_rows(r), posenc.sinusoidal(positions, 128, dtype="bfloat16"))
    bad = http.post("/v1/tables/pay/rows", json={"positions": [LIMIT + 1]})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "positions"
    outside = http.get(f"/v1/tables/pay/rows/{LIMIT + 1}")
    assert outside.status_code == 404 and outside.json()["error"]["field"] == "position", outside.text  # no such row
    assert str(LIMIT) in outside.json()["error"]["message"]


def test_http_put_lists_and_serves_a_computed_table(http):
    spec = {"encoding": {"kind": "rope", "head_dim": 64, "base": 500000.0}, "computed": True, "start": 0}
    assert http.put("/v1/tables/rope-any", json=spec).status_code == 401
    made = http.put("/v1/tables/rope-any", json=spec, headers=KEY)
    assert made.status_code == 201, made.text
    info = made.json()
    assert info["computed"] is True and info["shape"] == [LIMIT + 1, 64] and info["nbytes"] < 1024
    listed = {t["name"]: t for t in http.get("/v1/tables").json()["tables"]}
    assert listed["rope-any"]["computed"] and listed["pay"]["computed"] and not listed["stored"]["computed"]
    row = body_rows(http.get("/v1/tables/rope-any/rows/1700000000000", headers={"Accept": "application/octet-stream"}))
    cos, sin = posenc.rope_cos_sin([1_700_000_000_000], posenc.RopeSpec(64, base=500000.0))
    assert same_bits(row, np.concatenate([cos, sin], axis=1)[0])
    refused = http.put("/v1/tables/alibi-any", json={"encoding": {"kind": "alibi", "n_heads": 8}, "computed": True},
                       headers=KEY)
    assert refused.status_code == 422 and refused.json()["error"]["field"] == "computed"
    assert http.delete("/v1/tables/rope-any", headers=KEY).status_code == 204


def test_a_computed_table_never_stands_in_for_a_spec_request(http):
    """/v1 spec requests use a stored table that covers them (a gather); a computed one holds no rows."""
    service = http.app.api.state.service
    key = (posenc.SinusoidalSpec(128).canonical_json, None)
    candidates = service.tables.candidates(key, np.dtype("float32"))
    assert [t.name for t in candidates] == ["stored"]


def test_the_embedded_config_serves_a_computed_table():
    computed = [t for t in load().tables if t.spec.computed]
    assert [t.name for t in computed] == ["sin128-any"]
    assert computed[0].spec.encoding == posenc.SinusoidalSpec(128)
    assert (computed[0].spec.start, computed[0].spec.stop) == (-LIMIT, LIMIT + 1)


# --- the CLI -------------------------------------------------------------------------------------

def test_posenc_table_build_computed(shm_root, capsys):
    from posenc.cli import main

    root = ["--shm-dir", str(shm_root)]
    assert main(["table", "build", '{"kind": "sinusoidal", "dim": 128}', "--computed", *root]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"published sinusoidal-d128-any generation 1: {2 * LIMIT + 1}x128 float32 (576 B)")
    assert out.rstrip().endswith(f"serves any position in [{-LIMIT}, {LIMIT + 1}) of any sequence, computed on request")
    assert main(["table", "build", '{"kind": "rope", "head_dim": 64}', "--computed", "--positions", "0:4096",
                 *root]) == 0
    assert "published rope-d64-theta10000-4k-computed generation 2" in capsys.readouterr().out
    with attach("sinusoidal-d128-any", root=shm_root) as tbl:
        assert same_bits(tbl.lookup([1_700_000_000_123]), posenc.sinusoidal([1_700_000_000_123], 128))
    assert main(["table", "verify", *root]) == 0
    assert capsys.readouterr().out.count("ok    ") == 2
    assert main(["table", "build", '{"kind": "alibi", "n_heads": 8}', "--computed", "--positions", "0:8", *root]) == 2
    assert "computed: alibi rows cannot be computed on request" in capsys.readouterr().err


def test_config_tables_follow_the_service_limit_not_the_parsing_process():
    """A computed table's default range is every position the *service's* limit admits: set by the TOML
    key, or later by the environment or the flag; a stored table beyond that limit is refused naming it."""
    lowered = load(env={"POSENC_MAX_ABS_POSITION": "1e13"})
    anywhere = next(t.spec for t in lowered.tables if t.name == "sin128-any")
    assert (anywhere.start, anywhere.stop) == (-10**13, 10**13 + 1)
    toml = ('[limits]\nmax_abs_position = 1000000\n[[tables]]\nname = "tx"\ncomputed = true\n'
            'encoding = { kind = "sinusoidal", dim = 8 }\n')
    tx = ServiceConfig.from_toml(toml).tables[0].spec
    assert (tx.start, tx.stop) == (-10**6, 10**6 + 1)
    with pytest.raises(PosencError, match=r"tables\[0\].stop: .* \(limits.max_abs_position is 1000\)"):
        load(env={"POSENC_MAX_ABS_POSITION": "1000"})  # the embedded sin128 holds 131072 positions


def test_a_learned_table_cannot_be_computed_and_is_told_so_first():
    with pytest.raises(PosencError) as info:
        TableSpec.from_dict({"encoding": {"kind": "learned", "num_positions": 4, "dim": 2}, "computed": True})
    assert info.value.field == "computed" and "learned rows cannot be computed" in info.value.message


@pytest.mark.parametrize("value", ["yes", 1, 0, None, [], {}, 1.5])
def test_http_put_refuses_computed_of_every_other_json_type(http, value):
    spec = {"encoding": {"kind": "sinusoidal", "dim": 8}, "computed": value, "stop": 16}
    r = http.put("/v1/tables/typed", json=spec, headers=KEY)
    assert r.status_code == 422 and r.json()["error"]["field"] == "computed", r.text
