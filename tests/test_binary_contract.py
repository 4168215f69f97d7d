"""The parts of docs/protocol.md a third-party client depends on (issue 12): the header fields of
error replies, frequencies a client can reproduce bit for bit, rounding with column scales,
inline-spec block rules, inputs whose rows would not be finite, count 0, unused header fields,
RESOLVE's JSON types and the table-id limit."""

import math
import re
import struct
import subprocess

import numpy as np
import posenc
import pytest
from binary_support import (  # noqa: F401 (fixtures)
    ROOT, Raw, frame, positions_bytes, running_server, server, server_io, store_and_root, table_store, tables)
from conftest import DTYPES, assert_matches_oracle, compile_c_test
from crmath_oracle import cr_exp, cr_log, cr_pow
from posenc.client import Client, ServerError, Status
from posenc.client.inline import sinusoidal_aux
from posenc.client.protocol import SPEC_PREFIX, Opcode, PositionKind, SpecFlag, WireDtype
from posenc.dtypes import OUTPUT_DTYPES
from posenc.tables import TableSpec

pytestmark = pytest.mark.usefixtures("server_io")  # every test once on each event loop

DOC = (ROOT / "docs" / "protocol.md").read_text()
RNG = np.random.default_rng(12)


@pytest.fixture(scope="module")
def sin128_id(server):
    with Client(server.address) as c:
        return c.resolve("sin128").id


@pytest.fixture
def raw(server):
    with Raw(server.address) as conn:
        yield conn


def spec_aux(n_freq, row_width, sin_base, cos_base, n_cos, flags, amplitude=1.0, freqs=None, scale=None):
    freqs = np.full(n_freq, 0.5) if freqs is None else np.asarray(freqs, dtype="<f8")
    parts = [SPEC_PREFIX.pack(n_freq, row_width, sin_base, cos_base, n_cos, flags, amplitude), freqs.tobytes()]
    if scale is not None:
        parts.append(np.asarray(scale, dtype="<f8").tobytes())
    return b"".join(parts)


def encode_spec(aux, positions=(1.0,), dtype=WireDtype.FLOAT32, request_id=11, **fields):
    return frame(Opcode.ENCODE_SPEC, request_id, aux=aux, positions=positions_bytes(list(positions), "<f8"),
                 count=len(positions), dtype=dtype, position_kind=PositionKind.FLOAT64, **fields)


# --- error replies -----------------------------------------------------------------------

def test_a_request_error_echoes_opcode_and_request_id_and_zeroes_the_rest(raw, sin128_id):
    raw.send(frame(Opcode.ENCODE_TABLE, 0xDEADBEEF01, positions=positions_bytes([9999]), count=1,
                   table_id=sin128_id, dtype=WireDtype.FLOAT64))
    (length, opcode, status, dtype, request_id, rows, width, aux_len, table_id), payload = raw.raw_reply()
    assert (opcode, status, request_id) == (Opcode.ENCODE_TABLE, Status.POSITION_OUT_OF_RANGE, 0xDEADBEEF01)
    assert (dtype, rows, width, table_id) == (0, 0, 0, 0)
    assert length == 32 + aux_len and payload.decode().startswith("positions: ")


@pytest.mark.parametrize("bad", [struct.pack("<IBBBBQIIII", 32, 9, 1, 0, 0, 77, 0, 0, 0, 0),  # version
                                 struct.pack("<IBBBBQIIII", 40, 1, 1, 0, 0, 77, 0, 0, 0, 0),  # length
                                 struct.pack("<IBBBBQIIII", 32, 1, 1, 0, 0, 77, 0, 0, 0, 5)],  # reserved
                         ids=["bad-version", "bad-length", "reserved-set"])
def test_a_frame_level_error_is_the_same_however_tcp_splits_the_bytes(server, bad):
    replies = []
    for chunk in (len(bad), 1, 7):
        with Raw(server.address) as conn:
            conn.sock.setsockopt(6, 1, 1)  # TCP_NODELAY: each piece its own segment
            for at in range(0, len(bad), chunk):
                conn.send(bad[at:at + chunk])
            replies.append(conn.raw_reply())
            assert conn.closed()
    assert replies[0] == replies[1] == replies[2]
    fields, _ = replies[0]
    assert fields[1] == 0 and fields[4] == 0  # opcode, request_id: nothing of a bad frame is echoed


# --- frequencies and rounding ---------------------------------------------------------------

def test_vaswani_frequencies_follow_the_documented_operation_order():
    for dim in (1, 2, 7, 64, 100, 128, 1000, 8192):
        spec = posenc.SinusoidalSpec(dim)
        documented = [1.0 / cr_pow(10000.0, (2.0 * i) / dim) for i in range(spec.n_sin)]
        assert spec.freqs.tolist() == documented
    assert "1.0 / crmath.pow(base, (2.0 * i) / d)" in DOC
    # why the order is spelled out: the algebraically equal 10000^(-2i/d) is another float64
    other = [cr_pow(10000.0, -(2.0 * i) / 128) for i in range(64)]
    assert sum(a != b for a, b in zip(other, posenc.SinusoidalSpec(128).freqs.tolist())) == 25
    # and why correctly rounded: the C library's pow is another function (docs/protocol.md)
    libm = [1.0 / math.pow(10000.0, (2.0 * i) / 8192) for i in range(4096)]
    assert "3 of the 4096 frequencies" in DOC
    assert sum(a != b for a, b in zip(libm, posenc.SinusoidalSpec(8192).freqs.tolist())) <= 8


def test_t2t_frequencies_follow_the_documented_operation_order():
    spec = posenc.SinusoidalSpec(33, layout="t2t", min_timescale=2.0, max_timescale=1e5)
    log_inc = cr_log(1e5 / 2.0) / max(16 - 1, 1)
    assert spec.freqs.tolist() == [2.0 * cr_exp(i * -log_inc) for i in range(16)]


@pytest.fixture(scope="module")
def proto_freqs(tmp_path_factory):
    exe = compile_c_test(tmp_path_factory, "proto_freqs.c", "-lm")
    return lambda *args: [float.fromhex(v) for v in subprocess.run(
        [str(exe), *map(str, args)], capture_output=True, text=True, check=True).stdout.split()]


@pytest.mark.parametrize("dim", [8, 100, 128, 4096])
def test_the_c_helpers_give_the_library_frequencies_bit_for_bit(proto_freqs, dim):
    """posenc-load builds its inline spec with posenc_proto.h: the same rows as the library's spec."""
    assert proto_freqs("vaswani", 10000.0, dim) == posenc.SinusoidalSpec(dim).freqs.tolist()
    t2t = posenc.SinusoidalSpec(dim, layout="t2t", min_timescale=1.5, max_timescale=3e4)
    assert proto_freqs("t2t", 1.5, 3e4, dim) == t2t.freqs.tolist()


def test_the_frequency_helpers_need_the_macro_the_doc_names(tmp_path):
    """Issue 26: docs/protocol.md pointed to posenc_vaswani_freq without naming
    POSENC_PROTO_WANT_FREQS (an implicit declaration, then a link error). Built as the doc says."""
    import shutil

    from conftest import HERE

    doc = (HERE.parent / "docs" / "protocol.md").read_text()
    assert "`cc -DPOSENC_PROTO_WANT_FREQS ... -lm`" in doc
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler (cc/gcc/clang) on PATH")
    source = tmp_path / "client.c"
    source.write_text('#include <stdio.h>\n#include "posenc_proto.h"\n'
                      'int main(void) { printf("%a\\n", posenc_vaswani_freq(10000.0, 3, 128)); return 0; }\n')

    def build(*flags):
        return subprocess.run([cc, "-std=c11", "-Wall", "-Werror", f"-I{HERE.parent / 'native' / 'include'}",
                               *flags, str(source), "-lm", "-o", str(tmp_path / "client")], capture_output=True,
                              text=True, check=False)

    assert build().returncode != 0  # without the macro the helper is not declared
    assert build("-DPOSENC_PROTO_WANT_FREQS").returncode == 0
    out = subprocess.run([str(tmp_path / "client")], capture_output=True, text=True, check=True).stdout
    assert float.fromhex(out.strip()) == posenc.SinusoidalSpec(128).freqs[3]


@pytest.mark.parametrize("layout", ["interleaved", "t2t"])
def test_column_scales_round_as_documented(server, layout):
    """float32 with COLUMN_SCALE rounds twice (amplitude * sin to float32, then the float32 product
    with float32(scale)), exactly as posenc.sinusoidal computes it; every other dtype once, from
    the float64 product."""
    scale = RNG.uniform(0.1, 3.0, 33)
    plain = posenc.SinusoidalSpec(33, layout=layout, target_std=0.5)
    scaled = posenc.SinusoidalSpec(33, layout=layout, scale=scale, target_std=0.5)
    positions = RNG.uniform(-5000, 5000, 40)
    with Client(server.address) as c:
        unscaled = c.encode_spec(plain, positions, dtype="float64")  # amplitude * sin, float64
        rows = {dtype: c.encode_spec(scaled, positions, dtype=dtype) for dtype in DTYPES}
    expected = {"float32": unscaled.astype(np.float32) * scale.astype(np.float32)}
    for dtype in ("float64", "float16", "bfloat16"):
        expected[dtype] = (unscaled * scale).astype(OUTPUT_DTYPES[dtype])
    for dtype in DTYPES:
        assert np.array_equal(rows[dtype].view(np.uint8), expected[dtype].view(np.uint8)), dtype
    library = posenc.sinusoidal(positions, 33, layout=layout, scale=scale, target_std=0.5, dtype="float32")
    assert_matches_oracle(rows["float32"], library, "float32")


# --- inline-spec rules ------------------------------------------------------------------------

@pytest.mark.parametrize("zero_last", [False, True])
def test_an_empty_cos_block_places_nothing_whatever_its_base(raw, zero_last):
    flags = SpecFlag.ZERO_LAST if zero_last else 0
    width = 1 + int(zero_last)
    for cos_base in (0, width, 12345):
        raw.send(encode_spec(spec_aux(1, width, 0, cos_base, 0, flags, freqs=[0.5]), [2.0]))
        _, reply = raw.reply()
        assert not isinstance(reply, ServerError), (cos_base, reply)
        assert reply.array()[0, 0] == np.float32(math.sin(1.0))


@pytest.mark.parametrize("zero_last, message", [
    (False, "spec.sin_base: sin_base 2 + n_freq 3 = 5 is past the 4 columns sin and cos fill (row_width 4)"),
    (True, "spec.sin_base: sin_base 2 + n_freq 3 = 5 is past the 4 columns sin and cos fill "
           "(row_width 5 minus the zero_last column)"),
])
def test_a_block_past_the_row_is_refused_with_true_arithmetic(raw, zero_last, message):
    flags = SpecFlag.ZERO_LAST if zero_last else 0
    raw.send(encode_spec(spec_aux(3, 4 + int(zero_last), 2, 0, 1, flags)))
    assert str(raw.error(Status.BAD_ARGUMENT)) == message


# --- rows that would not be finite ---------------------------------------------------------------

@pytest.mark.parametrize("aux, positions, dtype, status, field", [
    (spec_aux(1, 2, 0, 0, 1, SpecFlag.INTERLEAVED, freqs=[1e300]), [2.0**31], WireDtype.FLOAT64,
     Status.POSITION_OUT_OF_RANGE, "positions"),
    (spec_aux(2, 4, 0, 0, 2, SpecFlag.INTERLEAVED, freqs=[1.0, 1e300]), [1.0, -1e9], WireDtype.FLOAT32,
     Status.POSITION_OUT_OF_RANGE, "positions"),
    (spec_aux(1, 2, 0, 0, 1, SpecFlag.INTERLEAVED, amplitude=1e300), [1.0], WireDtype.FLOAT32,
     Status.BAD_ARGUMENT, "spec.amplitude"),
    (spec_aux(1, 2, 0, 0, 1, SpecFlag.INTERLEAVED, amplitude=65520.0), [1.0], WireDtype.FLOAT16,
     Status.BAD_ARGUMENT, "spec.amplitude"),
    (spec_aux(1, 2, 0, 0, 1, SpecFlag.INTERLEAVED | SpecFlag.COLUMN_SCALE, amplitude=1e-30, scale=[1.0, 1e39]),
     [1.0], WireDtype.FLOAT32, Status.BAD_ARGUMENT, "spec.scale"),
    (spec_aux(1, 2, 0, 0, 1, SpecFlag.INTERLEAVED | SpecFlag.COLUMN_SCALE, amplitude=1e200, scale=[1.0, 1e200]),
     [1.0], WireDtype.FLOAT64, Status.BAD_ARGUMENT, "spec.scale"),
], ids=["angle-overflow", "angle-overflow-second-position", "amplitude-float32", "amplitude-float16",
        "scale-float32", "scale-float64"])
def test_finite_inputs_whose_rows_would_overflow_are_refused(raw, aux, positions, dtype, status, field):
    raw.send(encode_spec(aux, positions, dtype))
    err = raw.error(status)
    assert err.field == field, str(err)
    if field != "positions":  # a spec that cannot give finite rows is refused with no positions too
        raw.send(encode_spec(aux, [], dtype))
        assert raw.error(status).field == field


def test_the_largest_finite_values_are_still_served(raw):
    raw.send(encode_spec(spec_aux(1, 2, 0, 0, 1, SpecFlag.INTERLEAVED, amplitude=65504.0), [0.0], WireDtype.FLOAT16))
    _, reply = raw.reply()
    assert reply.array().tolist() == [[0.0, 65504.0]]
    raw.send(encode_spec(spec_aux(1, 2, 0, 0, 1, SpecFlag.INTERLEAVED, freqs=[1e300]), [1.0], WireDtype.FLOAT64))
    _, reply = raw.reply()
    assert np.isfinite(reply.array()).all()


# --- count 0 and unused fields ----------------------------------------------------------------

def test_count_zero_is_a_valid_request_with_no_rows(raw, sin128_id):
    raw.send(frame(Opcode.ENCODE_TABLE, 3, table_id=sin128_id, dtype=WireDtype.FLOAT64))
    (_, opcode, status, dtype, request_id, rows, width, _, table_id), payload = raw.raw_reply()
    assert (status, dtype, request_id, rows, width, table_id, payload) == (0, WireDtype.FLOAT64, 3, 0, 128,
                                                                           sin128_id, b"")
    raw.send(encode_spec(sinusoidal_aux(posenc.SinusoidalSpec(6)), []))
    _, reply = raw.reply()
    assert (reply.rows, reply.width) == (0, 6)
    raw.send(frame(Opcode.ENCODE_TABLE, 4, table_id=999))  # still checked: an unknown table
    raw.error(Status.UNKNOWN_TABLE)
    raw.send(encode_spec(spec_aux(1, 7, 0, 0, 1, SpecFlag.INTERLEAVED), []))  # and a bad spec
    raw.error(Status.BAD_ARGUMENT)


@pytest.mark.parametrize("opcode, aux", [(Opcode.PING, b"x"), (Opcode.STATS, b""), (Opcode.LIST_TABLES, b""),
                                         (Opcode.RESOLVE, b"sin128")])
@pytest.mark.parametrize("field", ["dtype", "position_kind", "table_id"])
def test_unused_header_fields_must_be_zero(raw, opcode, aux, field):
    raw.send(frame(opcode, 5, aux=aux, **{field: 1}))
    err = raw.error(Status.BAD_ARGUMENT)
    assert err.field == field and err.request_id == 5 and f"must be 0 for {opcode.name}" in str(err)


def test_encode_spec_takes_no_table_id(raw):
    raw.send(encode_spec(sinusoidal_aux(posenc.SinusoidalSpec(4)), table_id=2))
    assert raw.error(Status.BAD_ARGUMENT).field == "table_id"


# --- RESOLVE's JSON and the table-id limit ------------------------------------------------------

RESOLVE_TYPES = {"id": int, "name": str, "generation": int, "dtype": str, "rows": int, "width": int, "start": int,
                 "stop": int, "spec_hash": str, "created_ns": int, "writer_pid": int, "spec": dict, "computed": bool}


def test_resolve_json_has_the_documented_keys_and_types(raw):
    raw.send(frame(Opcode.RESOLVE, aux=b"t2t-33"))
    described = raw.reply()[1].json()
    assert {k: type(v) for k, v in described.items()} == RESOLVE_TYPES
    assert described["dtype"] in ("float32", "float64") and re.fullmatch(r"[0-9a-f]{16}", described["spec_hash"])
    assert (described["start"], described["stop"], described["rows"]) == (-100, 100, 200)
    assert described["spec"] == TableSpec(posenc.SinusoidalSpec(33, layout="t2t"), -100, 100).to_dict()
    for key, kind in RESOLVE_TYPES.items():  # the doc's table names each key with its JSON type
        assert re.search(rf"\| `{key}` \| {'string' if kind is str else 'object' if kind is dict else 'boolean' if kind is bool else 'integer'}",
                         DOC), key


def test_the_table_id_limit_refuses_new_names_and_keeps_old_ones():
    tables = {f"t{k}": TableSpec(posenc.SinusoidalSpec(4), 0, 8) for k in range(3)}
    with table_store(tables) as (_, root), running_server(root, threads=1, max_table_ids=2) as srv, \
            Client(srv.address) as c:
        assert [c.resolve("t0").id, c.resolve("t1").id] == [1, 2]
        with pytest.raises(ServerError) as err:
            c.resolve("t2")
        assert err.value.status == Status.INTERNAL and err.value.field == "name"
        assert "all 2 table ids (--max-table-ids)" in str(err.value)
        assert c.encode(2, [3]).shape == (1, 4) and c.resolve("t0").id == 1  # ids given out still answer
        listed = {t["name"]: t for t in c.list_tables()}
        assert listed["t2"].keys() == {"name", "error"} and listed["t1"]["id"] == 2
        assert c.stats()["limits"]["max_table_ids"] == 2


def test_the_table_id_limit_defaults_to_4096(server):
    with Client(server.address) as c:
        assert c.stats()["limits"]["max_table_ids"] == 4096
