"""16-bit rows from float32 tables, one rule on every way in (docs/shm.md, "16-bit rows from a float32 table").

* A learned float32 table holds the weights themselves: a float16 / bfloat16 answer is one rounding
  of the stored value, the same bits from the library, HTTP and the binary server.
* A computed float32 table holds values already rounded once: HTTP recomputes the rows holding a
  16-bit midpoint (the library's bits), the binary server, which has no kernels for the spec,
  refuses every such request saying what to do.
"""

import ml_dtypes
import numpy as np
import posenc
import pytest
from binary_support import running_server, table_store
from fastapi.testclient import TestClient
from posenc import checkpoint
from posenc.client import Client, ServerError
from posenc.config import ServiceConfig
from posenc.http import create_app
from posenc.tables import TableSpec

#: 65520 and beyond become float16 infinities: the expected answer, which numpy warns about
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
RNG = np.random.default_rng(26)
DIM = 24
HALF = {"float16": np.dtype(np.float16), "bfloat16": np.dtype(ml_dtypes.bfloat16)}


def weights() -> np.ndarray:
    """[2 + 64, DIM] float32 weights, with values on every edge of both 16-bit grids: midpoints
    (bfloat16: low 16 bits 0x8000; float16: 1 + 2^-11), float16 subnormals and its overflow edge."""
    w = (RNG.standard_normal((66, DIM)) * 0.05).astype(np.float32)
    bits = w.view(np.uint32)
    bits[3, :8] = (bits[3, :8] & 0xFFFF0000) | 0x8000  # bfloat16 midpoints, both ties
    w[4, :6] = [1 + 2**-11, 1 + 3 * 2**-11, -(2 + 2**-10), 2**-25, 3 * 2**-25, 1e-7]  # float16 midpoints, subnormals
    w[5, :5] = [65504.0, 65519.0, 65520.0, 70000.0, -3.0e38]  # float16's largest, its overflow tie, beyond
    return w


WEIGHTS = weights()
POSITIONS = np.array([0, 1, 2, 3, 63, 2, 17], np.int64)  # positions 1, 2, 3 (rows 3, 4, 5: offset 2) hold the edges
TABLES = {"wpe-f32": checkpoint.learned_table(WEIGHTS, tensor="wpe.weight", offset=2),
          # a tensor name with quotes and a fake "kind" in it: the server skips strings whole
          "wpe-odd": checkpoint.learned_table(WEIGHTS, tensor='x","kind":"rope', offset=2),
          "sin-f32": TableSpec(posenc.SinusoidalSpec(DIM), 0, 4096)}


@pytest.fixture(scope="module")
def services():
    """(binary client, HTTP client) over one shm directory holding TABLES."""
    with table_store(TABLES) as (_, root), running_server(root) as server, Client(server.address) as binary, \
            TestClient(create_app(ServiceConfig.from_dict({"server": {"shm_dir": str(root)}}))) as http:
        yield binary, http, root


def http_rows(http, name, positions, dtype) -> np.ndarray:
    r = http.post(f"/v1/tables/{name}/rows", json={"positions": positions.tolist(), "dtype": dtype},
                  headers={"Accept": "application/octet-stream"})
    assert r.status_code == 200, r.text
    return np.frombuffer(r.content, HALF[dtype]).reshape(len(positions), -1)


def raw(a) -> bytes:
    return np.ascontiguousarray(a).tobytes()


@pytest.mark.parametrize("name", ["wpe-f32", "wpe-odd"])
@pytest.mark.parametrize("dtype", sorted(HALF))
def test_learned_float32_table_one_rounding_everywhere(services, name, dtype):
    binary, http, root = services
    expected = WEIGHTS[POSITIONS + 2].astype(HALF[dtype])  # one rounding of each stored weight
    with posenc.shm.attach(name, root=root) as table:
        library = table.spec.cast_rows(table.lookup(POSITIONS), POSITIONS.astype(np.float64), HALF[dtype])
    assert raw(library) == raw(expected)
    assert raw(http_rows(http, name, POSITIONS, dtype)) == raw(expected)
    assert raw(binary.encode(name, POSITIONS, dtype=dtype)) == raw(expected)
    edges = expected[3].astype(np.float64)  # position 3 = row 5: float16's largest, its overflow tie, beyond
    if dtype == "float16":
        assert edges[0] == edges[1] == 65504 and np.isinf(edges[2:5]).all()
    ties = WEIGHTS[3, :8].astype(np.float64)  # position 1 = row 3: bfloat16 midpoints, rounded to even both ways
    if dtype == "bfloat16":
        assert (np.abs(expected[1, :8].astype(np.float64)) > np.abs(ties)).any()
        assert (np.abs(expected[1, :8].astype(np.float64)) < np.abs(ties)).any()


@pytest.mark.parametrize("dtype", sorted(HALF))
def test_computed_float32_table_http_recomputes_binary_refuses(services, dtype):
    binary, http, _ = services
    positions = np.arange(0, 4096, 7, dtype=np.int64)
    library = posenc.sinusoidal(positions, DIM, dtype=dtype)
    assert raw(http_rows(http, "sin-f32", positions, dtype)) == raw(library)
    with pytest.raises(ServerError, match=f"dtype: {dtype} rows from a computed float32 table would be rounded "
                                          "twice; ask float32, publish the table in float64, use ENCODE_SPEC, "
                                          "or ask HTTP") as info:
        binary.encode("sin-f32", positions[:1], dtype=dtype)
    assert info.value.field == "dtype"
    assert raw(binary.encode_spec(posenc.SinusoidalSpec(DIM), positions, dtype=dtype)) == raw(library)
