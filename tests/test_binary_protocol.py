"""The protocol's definitions, without a server: the C header and the Python client agree on
every constant, the documented frame layouts are what the client sends, inline specs encode
each layout's column plan, and addresses / positions / dtypes are checked client-side."""

import re
import struct
import subprocess
import sys

import numpy as np
import posenc
import pytest
from binary_support import ROOT
from posenc.client import parse_address
from posenc.client.calls import encode_spec, encode_table
from posenc.client.inline import spec_aux
from posenc.client.protocol import (
    DEFAULT_PORT,
    HEADER_SIZE,
    REQUEST,
    RESPONSE,
    SPEC_PREFIX,
    SPEC_PREFIX_SIZE,
    VERSION,
    Opcode,
    PositionKind,
    ServerError,
    SpecFlag,
    Status,
    WireDtype,
    wire_positions,
)
from posenc.config import ServerConfig
from posenc.errors import PosencError

HEADER = (ROOT / "native" / "include" / "posenc_proto.h").read_text()
DOC = (ROOT / "docs" / "protocol.md").read_text()


def c_constant(name: str) -> int:
    match = re.search(rf"\b{name}\s*=?\s*\(?(\d+)u?\b", HEADER)
    assert match, f"{name} not found in posenc_proto.h"
    return int(match.group(1))


@pytest.mark.parametrize("enum, prefix", [(Opcode, "POSENC_OP_"), (Status, "POSENC_STATUS_"),
                                          (WireDtype, "POSENC_DTYPE_"), (PositionKind, "POSENC_POSITIONS_"),
                                          (SpecFlag, "POSENC_SPEC_")])
def test_python_and_c_constants_agree(enum, prefix):
    for member in enum:
        assert c_constant(prefix + member.name) == member.value, member
    enumerators = re.findall(rf"\b{prefix}([A-Z0-9_]+)\s*=", HEADER)
    defines = re.findall(rf"#define {prefix}([A-Z0-9_]+)\s+\d+u?\s", HEADER)
    defined = set(enumerators + defines) - {"MAX", "FLAGS_ALL", "PREFIX_SIZE"}
    assert defined == {m.name for m in enum}


def test_sizes_version_and_port_agree():
    assert c_constant("POSENC_HEADER_SIZE") == HEADER_SIZE == REQUEST.size == RESPONSE.size == 32
    assert c_constant("POSENC_SPEC_PREFIX_SIZE") == SPEC_PREFIX_SIZE == SPEC_PREFIX.size
    assert c_constant("POSENC_PROTO_VERSION") == VERSION == 1
    assert c_constant("POSENC_DEFAULT_PORT") == DEFAULT_PORT == ServerConfig().binary_port


def test_every_opcode_and_status_is_documented():
    for member in [*Opcode, *Status]:
        assert f"`{member.name}`" in DOC, member


def test_a_request_frame_is_laid_out_as_documented():
    frame = encode_table(3, [7, -1], "bfloat16").frame(0x0102030405060708)
    assert len(frame) == 32 + 16
    assert struct.unpack_from("<IBBBBQIIII", frame) == (48, 1, Opcode.ENCODE_TABLE, WireDtype.BFLOAT16,
                                                          PositionKind.INT64, 0x0102030405060708, 3, 2, 0, 0)
    assert struct.unpack_from("<2q", frame, 32) == (7, -1)
    floats = encode_table(3, np.array([2.5]), "float32").frame(1)
    assert floats[7] == PositionKind.FLOAT64 and struct.unpack_from("<d", floats, 32) == (2.5,)


def prefix_of(aux: bytes) -> dict:
    keys = ["n_freq", "row_width", "sin_base", "cos_base", "n_cos", "flags", "amplitude"]
    return dict(zip(keys, SPEC_PREFIX.unpack_from(aux)))


PLAN_FIELDS = ("n_freq", "row_width", "sin_base", "cos_base", "n_cos", "flags")


@pytest.mark.parametrize("spec, plan", [  # plan: n_freq, row_width, sin_base, cos_base, n_cos, flags
    (posenc.SinusoidalSpec(7), (4, 7, 0, 0, 3, SpecFlag.INTERLEAVED)),
    (posenc.SinusoidalSpec(7, layout="halves"), (4, 7, 0, 4, 3, 0)),
    (posenc.SinusoidalSpec(7, layout="t2t"), (3, 7, 0, 3, 3, SpecFlag.ZERO_LAST)),
    (posenc.SinusoidalSpec(4, scale=[1, 2, 3, 4]), (2, 4, 0, 0, 2, SpecFlag.INTERLEAVED | SpecFlag.COLUMN_SCALE)),
    (posenc.RopeSpec(10), (5, 10, 5, 0, 5, 0)),
])
def test_inline_specs_encode_the_column_plan(spec, plan):
    aux = spec_aux(spec)
    prefix = prefix_of(aux)
    assert tuple(prefix[k] for k in PLAN_FIELDS) == plan
    scale = prefix["row_width"] if prefix["flags"] & SpecFlag.COLUMN_SCALE else 0
    assert len(aux) == SPEC_PREFIX_SIZE + 8 * (prefix["n_freq"] + scale)
    freqs = np.frombuffer(aux, "<f8", prefix["n_freq"], SPEC_PREFIX_SIZE)
    if isinstance(spec, posenc.SinusoidalSpec):
        assert np.array_equal(freqs, spec.freqs) and prefix["amplitude"] == spec.amplitude
    else:
        inv_freq, attention = posenc.rope_inv_freq(spec)
        assert np.array_equal(freqs, inv_freq) and prefix["amplitude"] == attention


def test_length_dependent_rope_uses_the_positions_or_seq_len():
    spec = posenc.RopeSpec(64, max_position_embeddings=4096, scaling={"rope_type": "dynamic", "factor": 4.0})
    short, long = spec_aux(spec, np.array([0, 10])), spec_aux(spec, np.array([0, 20000]))
    assert short == spec_aux(spec, None) != long
    assert spec_aux(spec, np.array([0, 10]), seq_len=20001) == long
    with pytest.raises(PosencError, match="seq_len"):
        encode_spec(posenc.SinusoidalSpec(8), [1], seq_len=5)


@pytest.mark.parametrize("text, family, target", [
    ("127.0.0.1:8001", "AF_INET", ("127.0.0.1", 8001)),
    ("tcp://localhost:9", "AF_INET", ("localhost", 9)),
    ("[::1]:8001", "AF_INET6", ("::1", 8001)),
    ("unix:/tmp/p.sock", "AF_UNIX", "/tmp/p.sock"),
    ("unix:///tmp/p.sock", "AF_UNIX", "/tmp/p.sock"),
    ("/run/posenc.sock", "AF_UNIX", "/run/posenc.sock"),
])
def test_addresses(text, family, target):
    addr = parse_address(text)
    assert addr.family.name == family and addr.target == target
    assert parse_address(str(addr)) == addr


@pytest.mark.parametrize("bad", ["localhost", "host:port", "host:0", "host:70000", "", 5])
def test_bad_addresses_name_the_field(bad):
    with pytest.raises(PosencError) as err:
        parse_address(bad)
    assert err.value.field == "address"


def test_positions_and_dtypes_are_checked_client_side():
    assert wire_positions(np.uint8(3))[0] == PositionKind.INT64
    assert wire_positions([1.5])[0] == PositionKind.FLOAT64
    for bad, field in [([[1, 2]], "positions"), (["a"], "positions"), (np.array([2**64 - 1], np.uint64), "positions")]:
        with pytest.raises(PosencError) as err:
            wire_positions(bad)
        assert err.value.field == field
    with pytest.raises(PosencError) as err:
        encode_table(1, [1], "int8")
    assert err.value.field == "dtype"


def test_server_errors_carry_field_status_and_whether_they_close():
    err = ServerError(Status.POSITION_OUT_OF_RANGE, "positions: element 0 is 9, outside [0, 4)", 12)
    assert (err.field, err.status, err.closes, err.request_id) == ("positions", Status.POSITION_OUT_OF_RANGE, False, 12)
    assert isinstance(err, ValueError) and ServerError(Status.BAD_FRAME, "length: x").closes


def test_binary_serve_builds_the_server_command_line():
    out = subprocess.run([sys.executable, "-m", "posenc.cli", "binary-serve", "--binary-port", "0",
                          "--binary-socket", "/tmp/x.sock",
                          "--shm-dir", "/tmp/shm", "--threads", "3", "--print-argv", "--", "--max-positions", "7"],
                         capture_output=True, text=True, check=True).stdout.split()
    assert out[0].endswith("posenc-server") and out[1] == "--no-tcp"  # port 0: no TCP listener
    flags = dict(zip(out[2::2], out[3::2]))
    assert flags["--unix"] == "/tmp/x.sock" and flags["--shm-dir"] == "/tmp/shm" and flags["--threads"] == "3"
    assert out[-2:] == ["--max-positions", "7"]
