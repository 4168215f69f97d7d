"""One `arrangement` for cos/sin on every way in: posenc.rope_cos_sin, POST /v1/rope/cos_sin and
posenc.torch.cos_sin take the same names ("freq", "cat", "interleave"), mean the same layout,
and agree value for value (bit for bit, every dtype); each one's default is what it gave before."""

import ml_dtypes
import numpy as np
import posenc
import posenc.torch
import pytest
import torch
from fastapi.testclient import TestClient
from posenc.config import ServiceConfig
from posenc.encodings.rope import ARRANGEMENTS
from posenc.http import create_app
from shm_support import published_config

ROPE = {"kind": "rope", "head_dim": 16, "base": 10000.0}
MROPE = {"head_dim": 16, "base": 10000.0, "mrope_section": [2, 3, 3]}
POSITIONS = [0, 1, 7, 1000]
RAW = "application/octet-stream"


def service_config(root: str) -> ServiceConfig:
    return ServiceConfig.from_dict({"server": {"shm_dir": root},
                                    "tables": [{"name": "rope16", "encoding": ROPE, "start": 0, "stop": 2048},
                                               {"name": "rope16d", "encoding": ROPE, "start": 0, "stop": 2048,
                                                "dtype": "float64"}]})


@pytest.fixture(scope="module")
def client():
    with published_config("posenc-arrangement-", service_config) as (config, _), \
            TestClient(create_app(config)) as c:
        yield c


def post(client, body) -> np.ndarray:
    """The rows of a 200 answer, as raw little-endian bytes (the one format every dtype has)."""
    r = client.post("/v1/rope/cos_sin", json=body, headers={"Accept": RAW})
    assert r.status_code == 200, r.text
    dtype = np.dtype(ml_dtypes.bfloat16 if r.headers["x-posenc-dtype"] == "bfloat16" else r.headers["x-posenc-dtype"])
    return np.frombuffer(r.content, dtype).reshape([int(n) for n in r.headers["x-posenc-shape"].split(",")])


def bits(a) -> np.ndarray:
    a = np.asarray(a)
    return a.view(np.uint16) if a.dtype == ml_dtypes.bfloat16 else a


def test_the_layouts_are_the_documented_ones():
    cos, sin = posenc.rope_cos_sin(POSITIONS, ROPE)
    assert cos.shape == (4, 8)  # the default: one column per frequency, as before
    cat, cat_sin = posenc.rope_cos_sin(POSITIONS, ROPE, arrangement="cat")
    inter, _ = posenc.rope_cos_sin(POSITIONS, ROPE, arrangement="interleave")
    assert np.array_equal(cat, np.concatenate([cos, cos], axis=1)) and np.array_equal(cat_sin[:, 8:], sin)
    assert np.array_equal(inter[:, 0::2], cos) and np.array_equal(inter[:, 1::2], cos)
    assert set(ARRANGEMENTS) == {"freq", "cat", "interleave"}


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("arrangement", list(ARRANGEMENTS))
def test_library_http_and_torch_agree_bit_for_bit(client, arrangement, dtype):
    cos, sin = posenc.rope_cos_sin(POSITIONS, ROPE, dtype=dtype, arrangement=arrangement)
    width = 8 * ARRANGEMENTS[arrangement]
    assert cos.shape == sin.shape == (4, width) and cos.dtype.name == dtype
    expected = np.concatenate([cos, sin], axis=1)
    body = {"positions": POSITIONS, "dtype": dtype, "arrangement": arrangement}
    table = "rope16d" if dtype == "float64" else "rope16"  # a float32 table serves no float64 rows
    for source in ({"spec": ROPE}, {"table": table}, {"spec": {**ROPE, "base": 10000}}):
        got = post(client, {**body, **source})
        assert got.dtype == expected.dtype and np.array_equal(bits(got), bits(expected)), source
    t_cos, t_sin = posenc.torch.cos_sin(torch.tensor([POSITIONS]), ROPE, dtype=getattr(torch, dtype),
                                        arrangement=arrangement)
    assert tuple(t_cos.shape) == (1, 4, width)
    for tensor, array in ((t_cos, cos), (t_sin, sin)):
        as_np = tensor[0].view(torch.int16).numpy().view(np.uint16) if dtype == "bfloat16" else tensor[0].numpy()
        assert np.array_equal(as_np, bits(array))


def test_table_hit_counts_as_a_hit_with_any_arrangement(client):
    """A spec request a published table covers is gathered from it, then laid out."""
    got = post(client, {"spec": ROPE, "positions": [3, 2047], "arrangement": "interleave"})
    cos, sin = posenc.rope_cos_sin([3, 2047], ROPE, arrangement="interleave")
    assert np.array_equal(got, np.concatenate([cos, sin], axis=1))


def test_mrope_positions_take_the_arrangement(client):
    positions = [[0, 5, 9], [0, 2, 3], [0, 1, 1]]
    got = post(client, {"spec": MROPE, "positions": positions, "arrangement": "cat"})
    cos, sin = posenc.rope_cos_sin(positions, MROPE, arrangement="cat")
    assert got.shape == (3, 32) and np.array_equal(got, np.concatenate([cos, sin], axis=1))


def test_defaults_are_unchanged(client):
    """The library and HTTP default to "freq" (their layouts before arrangement existed); torch to "cat"."""
    cos, sin = posenc.rope_cos_sin(POSITIONS, ROPE)
    assert np.array_equal(post(client, {"spec": ROPE, "positions": POSITIONS}), np.concatenate([cos, sin], axis=1))
    t_cos, _ = posenc.torch.cos_sin(torch.tensor(POSITIONS), ROPE)
    assert np.array_equal(t_cos.numpy(), np.concatenate([cos, cos], axis=1))


@pytest.mark.parametrize("bad", ["half", "interleaved", "", None])
def test_unknown_arrangement_is_refused_naming_the_field(client, bad):
    with pytest.raises(posenc.PosencError, match="arrangement: must be one of"):
        posenc.rope_cos_sin(POSITIONS, ROPE, arrangement=bad)
    with pytest.raises(posenc.PosencError, match="arrangement: must be one of"):
        posenc.torch.cos_sin(POSITIONS, ROPE, arrangement=bad)
    r = client.post("/v1/rope/cos_sin", json={"spec": ROPE, "positions": [0], "arrangement": bad})
    assert r.status_code == 422 and r.json()["error"]["field"] == "arrangement", r.text
