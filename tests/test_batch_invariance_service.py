"""Batch invariance through the services: the HTTP app (in process) and the binary server
(ENCODE_SPEC runs the same native kernels in C) answer every row with the library's value, bit
for bit, in every dtype, whatever else is in the request and whether a table or the kernels
answered it."""

import numpy as np
import posenc
import pytest
from binary_support import running_server, table_store
from conftest import DTYPES
from fastapi.testclient import TestClient
from posenc.api import rope_table
from posenc.client import Client, ServerError
from posenc.config import ServiceConfig
from posenc.dtypes import OUTPUT_DTYPES
from posenc.http import create_app
from posenc.tables import TableSpec
from shm_support import published_config
from test_batch_invariance import LLAMA3, assert_bitwise
from test_http_routes import RAW, array_of, hits

TOP = 2**31
SIN = {"kind": "sinusoidal", "dim": 128}
ROPE = {"kind": "rope", "head_dim": 128, "base": 500000.0, "scaling": LLAMA3}
TABLES = [{"name": "inv-sin128", "encoding": SIN, "start": 0, "stop": 4096},
          {"name": "inv-rope128", "encoding": ROPE, "start": 0, "stop": 4096, "dtype": "float64"}]
RNG = np.random.default_rng(11)
#: positions with every kind of neighbour: +-2^31, fractional, a contiguous run, shuffled integers
MIXED = np.concatenate([[-TOP, 7.0, 0.5, TOP], np.arange(1000.0, 2100.0), RNG.uniform(-1e6, 1e6, 20),
                        RNG.integers(-TOP, TOP, 50).astype(float)])
INSIDE = np.concatenate([[0, 4095, 1024, 1023], RNG.integers(0, 4096, 300)]).astype(np.int64)


def library_rows(encoding: dict, positions, dtype: str) -> np.ndarray:
    if encoding["kind"] == "rope":
        return rope_table(positions, posenc.RopeSpec.from_dict(encoding), dtype=dtype)
    return posenc.sinusoidal(positions, encoding["dim"], dtype=dtype)


def as_list(positions) -> list:
    return [int(p) if float(p).is_integer() else float(p) for p in positions]


# --- HTTP ----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def http():
    def config_of(root):
        return ServiceConfig.from_dict({"server": {"shm_dir": root},
                                        "limits": {"max_positions": 5000, "max_output_bytes": 16 << 20},
                                        "tables": TABLES})

    with published_config("posenc-invariance-http-", config_of) as (config, _), \
            TestClient(create_app(config)) as client:
        yield client


def http_rows(client, encoding: dict, positions, dtype: str) -> np.ndarray:
    path = "/v1/rope/cos_sin" if encoding["kind"] == "rope" else "/v1/sinusoidal"
    spec = {k: v for k, v in encoding.items() if k != "kind"}
    return array_of(client.post(path, json={"spec": spec, "positions": as_list(positions), "dtype": dtype},
                                headers={"Accept": RAW}))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("encoding", [SIN, ROPE], ids=["sinusoidal", "rope"])
def test_http_computed_rows_are_the_library_rows(http, encoding, dtype):
    """A miss (fractional and out-of-table positions): the kernels, then one cast."""
    got = http_rows(http, encoding, MIXED, dtype)
    assert_bitwise(got, library_rows(encoding, MIXED, dtype))
    alone = np.concatenate([http_rows(http, encoding, MIXED[k:k + 1], dtype) for k in (0, 1, 2, 500)])
    assert_bitwise(alone, got[[0, 1, 2, 500]])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("encoding", [SIN, ROPE], ids=["sinusoidal float32 table", "rope float64 table"])
def test_http_table_hits_are_the_computed_rows(http, encoding, dtype):
    """Integer positions inside a published table: gathered (16-bit from float32 rounded once)."""
    stored = "float64" if encoding is ROPE else "float32"
    before = hits(http)
    got = http_rows(http, encoding, INSIDE, dtype)
    served_by_table = OUTPUT_DTYPES[dtype].itemsize <= OUTPUT_DTYPES[stored].itemsize
    assert hits(http)["hit"] == before.get("hit", 0) + served_by_table
    assert_bitwise(got, library_rows(encoding, INSIDE.astype(np.float64), dtype))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_http_named_table_rows_are_the_computed_rows(http, dtype):
    rows = array_of(http.post("/v1/tables/inv-sin128/rows", json={"positions": INSIDE.tolist(), "dtype": dtype},
                              headers={"Accept": RAW}))
    one = array_of(http.get(f"/v1/tables/inv-sin128/rows/{int(INSIDE[5])}", params={"dtype": dtype},
                            headers={"Accept": RAW}))
    expected = library_rows(SIN, INSIDE.astype(np.float64), dtype)
    assert_bitwise(rows, expected)
    assert_bitwise(one, expected[5])


# --- the binary protocol -------------------------------------------------------------------------

BINARY_TABLES = {"sin128": TableSpec(posenc.SinusoidalSpec(128), 0, 4096)}


@pytest.fixture(scope="module")
def binary():
    with table_store(BINARY_TABLES) as (_, root), running_server(root) as server, Client(server.address) as client:
        yield client


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("encoding", [SIN, ROPE], ids=["sinusoidal", "rope"])
def test_binary_encode_spec_rows_are_the_library_rows(binary, encoding, dtype):
    """ENCODE_SPEC: the server's C kernels, in chunks of its own choosing (256 KiB of rows per
    kernel call), then its own cast to the wire dtype: the library's bits."""
    spec = posenc.RopeSpec.from_dict(encoding) if encoding["kind"] == "rope" else posenc.SinusoidalSpec(128)
    big = np.concatenate([MIXED, np.arange(-3000.0, 3000.0)])  # several server chunks
    got = binary.encode_spec(spec, big, dtype=dtype)
    assert_bitwise(got, library_rows(encoding, big, dtype))
    alone = np.concatenate([binary.encode_spec(spec, big[k:k + 1], dtype=dtype) for k in (0, 1, 2, 3000)])
    assert_bitwise(alone, got[[0, 1, 2, 3000]])


def test_binary_float32_table_rows_are_the_computed_rows(binary):
    assert_bitwise(binary.encode("sin128", INSIDE, dtype="float32"),
                   library_rows(SIN, INSIDE.astype(np.float64), "float32"))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_binary_refuses_16bit_rows_from_a_float32_table_rather_than_round_twice(binary, dtype):
    """The stored float32 bits cannot say which way a 16-bit midpoint goes: a clear error, never a
    second rounding; the same rows asked as ENCODE_SPEC come back rounded once."""
    with pytest.raises(ServerError, match="rounded twice") as info:
        binary.encode("sin128", INSIDE, dtype=dtype)
    assert info.value.field == "dtype"
    expected = library_rows(SIN, INSIDE.astype(np.float64), dtype)
    assert_bitwise(binary.encode_spec(posenc.SinusoidalSpec(128), INSIDE, dtype=dtype), expected)
