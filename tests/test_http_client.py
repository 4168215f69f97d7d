"""posenc.client.HttpClient / AsyncHttpClient against a real `posenc serve`: numpy arrays out,
equal to the library's, binary on the wire, server errors raised as HttpError with code and field."""

import asyncio
import io

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient
from conftest import hf_config
from shm_support import published_config

import posenc
from posenc.client import AsyncHttpClient, HttpClient, HttpError
from posenc.config import ServiceConfig
from posenc.http import create_app
from serve_support import served

CONFIG = """
[server]
workers = 1
binary_port = 0
shm_dir = "{shm_dir}"

[[tables]]
name = "sin64"
encoding = {{ kind = "sinusoidal", dim = 64 }}
start = 0
stop = 4096
"""
LLAMA = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4, "rope_theta": 500000.0,
         "max_position_embeddings": 8192}


@pytest.fixture(scope="module")
def server():
    with served(lambda shm_dir: CONFIG.format(shm_dir=shm_dir), prefix="posenc-client-test-") as process:
        yield process


@pytest.fixture
def client(server):
    with HttpClient(server.url) as c:
        yield c


def test_a_layer_by_index_is_the_librarys_layer(client):
    config = hf_config("gemma-3-1b")  # sliding and full attention layers, each its own RoPE
    model = posenc.from_hf_config(config)
    for layer in (0, 5):
        entry = model.layer(layer)
        cos, sin = client.rope_cos_sin([0, 7, 4096], hf_config=config, layer=layer)
        want_cos, want_sin = posenc.rope_cos_sin([0, 7, 4096], entry.spec)
        np.testing.assert_array_equal(cos, want_cos)
        np.testing.assert_array_equal(sin, want_sin)
        assert client.model_positions(config, layer=layer)["layer_types"] == {entry.layer_type: entry.to_dict()}
    assert model.layer(0).spec != model.layer(5).spec  # the two layers above differ
    with pytest.raises(HttpError) as err:
        client.rope_cos_sin([1], hf_config=config, layer=26)
    assert err.value.field == "layer"


def test_rows_are_the_library_values(client):
    want = posenc.sinusoidal([0, 5, 4095], 64)
    np.testing.assert_array_equal(client.rows("sin64", [0, 5, 4095]), want)
    np.testing.assert_array_equal(client.row("sin64", 5), want[1])
    assert client.rows("sin64", [1], dtype="bfloat16").dtype.name == "bfloat16"


def test_computed_requests_match_the_library(client):
    positions = [0.5, 7, 100000]
    np.testing.assert_array_equal(client.sinusoidal(positions, {"dim": 32}), posenc.sinusoidal(positions, 32))
    spec = posenc.RopeSpec.from_hf_config(LLAMA)
    cos, sin = client.rope_cos_sin(positions, spec)
    want_cos, want_sin = posenc.rope_cos_sin(positions, spec)
    np.testing.assert_array_equal(cos, want_cos)
    np.testing.assert_array_equal(sin, want_sin)
    cos2, _ = client.rope_cos_sin(positions, hf_config=LLAMA)
    np.testing.assert_array_equal(cos2, want_cos)
    for arrangement in ("cat", "interleave"):  # transformers' shapes, binary body and JSON body alike
        want = posenc.rope_cos_sin(positions, spec, arrangement=arrangement)
        for got in (client.rope_cos_sin(positions, spec, arrangement=arrangement),
                    client.rope_cos_sin(positions, hf_config=LLAMA, arrangement=arrangement)):
            np.testing.assert_array_equal(got[0], want[0])
            np.testing.assert_array_equal(got[1], want[1])
    inv, factor = client.rope_inv_freq(spec)
    np.testing.assert_array_equal(inv, posenc.rope_inv_freq(spec)[0])
    assert factor == 1.0


def test_rope_apply_round_trips_npy(client):
    spec = posenc.RopeSpec(16)
    x = np.random.default_rng(0).standard_normal((2, 5, 16))
    got = client.rope_apply(x, spec, offset=100)
    np.testing.assert_array_equal(got, posenc.rope_apply(x, np.arange(100, 105), spec))


def test_alibi_and_t5(client):
    np.testing.assert_array_equal(client.alibi_slopes(12), posenc.alibi_slopes(12))
    np.testing.assert_array_equal(client.alibi_bias(2, 3, 4), posenc.alibi_bias(2, 3, 4))
    rel = np.array([-200, -3, 0, 3, 200])
    np.testing.assert_array_equal(client.t5_buckets(rel), posenc.t5_relative_position_bucket(rel))
    assert any(t["name"] == "sin64" for t in client.tables())


def test_errors_carry_the_server_code_and_field(client):
    with pytest.raises(HttpError) as info:
        client.sinusoidal([1], {"dim": -1})
    assert info.value.status == 422 and info.value.field == "spec.dim"
    assert isinstance(info.value, posenc.PosencError)
    with pytest.raises(HttpError) as info:
        client.rows("nope", [1])
    assert info.value.status == 404


def test_async_client(server):
    async def main():
        async with AsyncHttpClient(server.url) as c:
            rows, (cos, _) = await asyncio.gather(c.rows("sin64", [1, 2]),
                                                  c.rope_cos_sin([3], {"head_dim": 8}))
            return rows, cos

    rows, cos = asyncio.run(main())
    np.testing.assert_array_equal(rows, posenc.sinusoidal([1, 2], 64))
    np.testing.assert_array_equal(cos, posenc.rope_cos_sin([3], posenc.RopeSpec(8))[0])


class _AnsweredInTheProtocol(httpx.BaseTransport):
    """Each request as the HTTP protocol hands it to the app's `answer_now` (method, path, query,
    headers, whole body): the path that answers without an ASGI task, which `posenc bench http`
    measures. A request it declines would have gone the general way: the test fails."""

    def __init__(self, app):
        self.app = app

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        scope = {"type": "http", "method": request.method, "path": request.url.path,
                 "query_string": request.url.query, "headers": [(k.lower(), v) for k, v in request.headers.raw]}
        found = self.app.answer_now(scope, request.read())
        assert found is not None, f"{request.method} {request.url} was not answered in the protocol"
        return httpx.Response(200, headers=found.headers, content=bytes(found.payload), request=request)


def test_the_clients_requests_take_the_fast_path():
    """What the client sends by default (raw int64 positions, the spec and dtype in the query, binary
    answers) is what the protocol answers itself, for rows, a spec and RoPE; the values are the
    library's."""
    def config_of(root):
        return ServiceConfig.from_toml(CONFIG.format(shm_dir=root))

    with published_config("posenc-client-fast-", config_of) as (config, _):
        app = create_app(config)
        with TestClient(app), HttpClient("http://posenc", transport=_AnsweredInTheProtocol(app)) as c:
            assert np.array_equal(c.row("sin64", 5), posenc.sinusoidal([5], 64)[0])
            assert np.array_equal(c.rows("sin64", [3, 4000]), posenc.sinusoidal([3, 4000], 64))
            assert np.array_equal(c.sinusoidal([7, 9], {"dim": 64}), posenc.sinusoidal([7, 9], 64))
            assert np.array_equal(c.sinusoidal([7], {"dim": 32}, dtype="float16"),
                                  posenc.sinusoidal([7], 32, dtype="float16"))
            cos, sin = c.rope_cos_sin([1, 100000], {"head_dim": 64})
            want_cos, want_sin = posenc.rope_cos_sin([1, 100000], {"head_dim": 64})
            assert np.array_equal(cos, want_cos) and np.array_equal(sin, want_sin)


def test_model_positions_audit_and_info_have_calls(client):
    """Issue 26: HttpClient had no call for /v1/models/positions, /v1/audit or /info."""
    from audit_recipes import exact

    model = client.model_positions(LLAMA)
    assert model["model_type"] == "llama" and list(model["layer_types"]) == ["default"]
    entry = model["layer_types"]["default"]
    assert entry["kind"] == "rope" and entry["spec"]["head_dim"] == 64 and entry["spec"]["base"] == 500000.0
    config = {**LLAMA, "max_position_embeddings": 512}  # the whole cache: nothing to warn about
    spec = posenc.RopeSpec.from_hf_config(config)
    report = client.audit(exact(spec, np.arange(512)), config=config)
    assert report["status"] == "correct" and report["expected"]["spec"]["base"] == 500000.0
    shifted = client.audit(exact(spec, np.arange(1, 513)), config=config, start=0)  # rows one position late
    assert shifted["diagnosis"]["cause"] == "position_offset"
    buffer = io.BytesIO()
    np.save(buffer, np.stack([exact(spec, np.arange(512))["cos"], exact(spec, np.arange(512))["sin"]]))
    assert client.audit(buffer.getvalue(), config=config)["status"] == "correct"  # a file's bytes as they are
    with pytest.raises(posenc.PosencError, match="arrays: must be a dict of named arrays"):
        client.audit([1, 2, 3])
    info = client.info()
    assert info["version"] == posenc.__version__ and "sin64" in [t["name"] for t in info["tables"]]


@pytest.mark.parametrize("asynchronous", [False, True])
def test_an_unreachable_service_is_a_posenc_error_naming_the_address(asynchronous):
    """Issue 26: a raw httpx.ConnectError before."""
    from posenc.client import ServiceUnreachable

    url = "http://127.0.0.1:1"  # nothing listens on port 1

    async def call_async():
        async with AsyncHttpClient(url, timeout=5) as c:
            await c.rows("sin64", [1])

    with pytest.raises(ServiceUnreachable) as err:
        if asynchronous:
            asyncio.run(call_async())
        else:
            with HttpClient(url, timeout=5) as c:
                c.info()
    assert isinstance(err.value, posenc.PosencError) and err.value.field == "base_url"
    assert f"cannot connect to the posenc service at {url}" in str(err.value) and "ConnectError" in str(err.value)
    assert isinstance(err.value.cause, httpx.ConnectError)


def test_bfloat16_rows_of_a_float32_table_are_the_single_rounding_the_library_gives(client):
    """docs/protocol.md, the 16-bit rule: HTTP answers bf16 from a float32 table (recomputing the
    midpoint rows) with the library's bits; posenc-server refuses the same request instead."""
    import ml_dtypes

    positions = np.arange(4096)
    got = client.rows("sin64", positions, dtype="bfloat16")
    want = posenc.sinusoidal(positions, 64, dtype="bfloat16")
    assert got.dtype == ml_dtypes.bfloat16 and np.array_equal(got.view(np.uint16), want.view(np.uint16))
    twice = posenc.sinusoidal(positions, 64).astype(ml_dtypes.bfloat16)  # float32 bits cast again
    assert not np.array_equal(twice.view(np.uint16), want.view(np.uint16))  # the midpoints are in this range
