"""Model configs and M-RoPE through the service: POST /v1/models/positions, `layer_type` on every
route taking `hf_config`, M-RoPE [3, n] positions over HTTP (cos_sin, apply) and over the binary
protocol (one ENCODE_SPEC per frequency chunk), against the float64 oracle."""

import asyncio
import io
import json
import re
import shutil
import tempfile

import numpy as np
import pytest
from binary_support import running_server
from conftest import assert_matches_oracle, hf_config
from serve_support import app_client

import posenc
from posenc import reference
from posenc.cli import main
from posenc.client import AsyncClient, Client
from posenc.shm import attach

NPY = "application/x-npy"
QWEN2_VL = {"head_dim": 128, "base": 1e6, "mrope_section": [16, 24, 24]}
#: Text tokens 0..4, then a 2x3x4 (t, h, w) vision grid after them, then far positions.
GRID = np.stack(np.meshgrid(np.arange(2), np.arange(3), np.arange(4), indexing="ij")).reshape(3, -1) + 5
POSITIONS = np.concatenate([np.tile(np.arange(5), (3, 1)), GRID, [[70000], [3], [123456]]], axis=1)


def mrope_oracle(spec: posenc.RopeSpec, positions) -> np.ndarray:
    inv, attention = posenc.rope_inv_freq(spec)
    cos, sin = reference.mrope_cos_sin(positions, inv, spec.mrope_section, attention)
    return np.concatenate([cos, sin], axis=1)


@pytest.fixture(scope="module")
def client():
    with app_client("posenc-models-") as c:
        yield c


def npy(arr) -> bytes:
    out = io.BytesIO()
    np.save(out, arr)
    return out.getvalue()


# --- /v1/models/positions and layer_type ---------------------------------------------------------
def test_models_positions_returns_the_summary(client):
    config = hf_config("llama-3.1-8b")
    r = client.post("/v1/models/positions", json={"hf_config": config})
    assert r.status_code == 200, r.text
    assert r.json() == posenc.from_hf_config(config).to_dict()
    entry = next(iter(r.json()["layer_types"].values()))
    assert entry["kind"] == "rope" and entry["spec"] == posenc.RopeSpec.from_hf_config(config).to_dict()


def test_models_positions_carries_the_notes(client):
    """What the reading took (Kimi-K2 read through its architecture) reaches an HTTP caller too;
    a model type nothing identifies is a 422 naming it."""
    config = hf_config("kimi-k2-instruct")
    r = client.post("/v1/models/positions", json={"hf_config": config})
    assert r.status_code == 200, r.text
    assert r.json()["notes"] == list(posenc.from_hf_config(config).notes) and "deepseek_v3" in r.json()["notes"][0]
    r = client.post("/v1/models/positions", json={"hf_config": {**config, "architectures": ["KimiForCausalLM"]}})
    assert r.status_code == 422 and r.json()["error"]["field"] == "hf_config.model_type", r.text


@pytest.mark.parametrize("body, field", [
    ({}, "hf_config"),
    ({"hf_config": "llama"}, "hf_config"),
    ({"hf_config": {"model_type": 7}}, "hf_config.model_type"),
    ({"hf_config": {}, "layer_type": "x"}, "layer_type"),
])
def test_models_positions_errors_name_the_field(client, body, field):
    r = client.post("/v1/models/positions", json=body)
    assert r.status_code == 422 and r.json()["error"]["field"] == field, r.text


@pytest.mark.parametrize("route, extra", [("/v1/rope/cos_sin", {"positions": [0, 5]}),
                                          ("/v1/rope/inv_freq", {}),
                                          ("/v1/rope/apply", {"x": [[1.0] * 128]})])
def test_hf_config_routes_take_a_layer_type(client, route, extra):
    config = hf_config("llama-3.1-8b")
    (layer_type,) = posenc.from_hf_config(config).layer_types
    spec = {"spec": posenc.RopeSpec.from_hf_config(config).to_dict()}
    by_spec = client.post(route, json={**spec, **extra})
    by_layer = client.post(route, json={"hf_config": config, "layer_type": layer_type, **extra})
    assert by_layer.status_code == 200 and by_layer.content == by_spec.content
    wrong = client.post(route, json={"hf_config": config, "layer_type": "sliding_attention", **extra}).json()
    assert wrong["error"]["field"] == "layer_type" and repr(layer_type) in wrong["error"]["message"]
    alone = client.post(route, json={**spec, "layer_type": layer_type, **extra}).json()
    assert alone["error"].pop("request_id")
    assert alone["error"] == {"code": "invalid_parameter", "field": "layer_type",
                              "message": "layer_type: applies to hf_config only"}


#: Gemma-3 (text): sliding layers RoPE base 1e4, every 6th layer global with base 1e6 and linear x8.
GEMMA3 = {"model_type": "gemma3_text", "hidden_size": 640, "num_attention_heads": 4, "head_dim": 256,
          "num_hidden_layers": 6, "max_position_embeddings": 64, "rope_theta": 1e6, "rope_local_base_freq": 1e4,
          "sliding_window_pattern": 6, "rope_scaling": {"rope_type": "linear", "factor": 8.0}}


def test_a_model_with_several_layer_types_needs_a_layer_type(client):
    r = client.post("/v1/rope/cos_sin", json={"hf_config": GEMMA3, "positions": [0, 7]})
    assert r.status_code == 422 and r.json()["error"]["field"] == "layer_type"
    assert "['full_attention', 'sliding_attention']" in r.json()["error"]["message"]
    model = posenc.from_hf_config(GEMMA3)
    for layer_type in model.layer_types:
        spec = model[layer_type].spec
        r = client.post("/v1/rope/cos_sin", json={"hf_config": GEMMA3, "layer_type": layer_type,
                                                   "positions": [0, 7, 63], "dtype": "float64"})
        assert r.status_code == 200, r.text
        inv, attention = posenc.rope_inv_freq(spec)
        cos, sin = reference.rope_cos_sin(np.array([0, 7, 63]), inv, attention)
        assert_matches_oracle(np.array(r.json()["data"]), np.concatenate([cos, sin], 1), "float64", angle_max=63.0)
    summary = client.post("/v1/models/positions", json={"hf_config": GEMMA3}).json()["layer_types"]
    assert summary["full_attention"]["layers"] == [5] and summary["sliding_attention"]["spec"]["base"] == 1e4


def test_cli_config_build_publishes_one_table_per_layer_type(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(GEMMA3))
    assert main(["table", "build", str(path), "--name", "gemma3", "--shm-dir", str(tmp_path / "shm")]) == 0
    out = capsys.readouterr().out
    assert "published gemma3.full_attention generation" in out and "published gemma3.sliding_attention" in out
    model = posenc.from_hf_config(GEMMA3)
    for layer_type in model.layer_types:
        with attach(f"gemma3.{layer_type}", root=tmp_path / "shm") as tbl:
            assert tbl.spec.encoding == model[layer_type].spec and tbl.array.shape == (64, 256)
    assert main(["table", "build", str(path), "--layer-type", "sliding_attention", "--positions", "0:8",
                 "--shm-dir", str(tmp_path / "shm")]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    # the default name: the model's directory (no _name_or_path here), the positions, the layer type
    assert re.match(rf"published {re.escape(tmp_path.name)}-8\.sliding_attention generation \d+: 8x256 ", line)
    before = sorted(p.name for p in (tmp_path / "shm").iterdir())
    assert main(["table", "build", str(path), "--name", "g" * 50, "--shm-dir", str(tmp_path / "shm")]) == 2
    assert "name: 'gggggggggggggggggggggggggggggggggggggggggggggggggg.full_attention' must be 1..64" in \
        capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "shm").iterdir()) == before  # names checked before any publish


WHISPER = {"model_type": "whisper", "d_model": 64, "encoder_attention_heads": 4, "max_source_positions": 30,
           "max_target_positions": 20, "encoder_layers": 2, "decoder_layers": 2}
BLOOM = {"model_type": "bloom", "hidden_size": 64, "n_head": 4, "n_layer": 2}
T5 = {"model_type": "t5", "d_model": 64, "num_heads": 4, "num_layers": 2}


def test_cli_config_build_tabulates_sinusoidal_and_alibi_and_explains_the_rest(tmp_path, capsys):
    """Whisper: the encoder's sinusoids become a table, the decoder's learned table is skipped with
    the command that builds it; BLOOM's ALiBi needs positions (its config has no context length)."""
    path, root = tmp_path / "config.json", str(tmp_path / "shm")
    path.write_text(json.dumps(WHISPER))
    assert main(["table", "build", str(path), "--name", "whisper", "--shm-dir", root]) == 0
    out = capsys.readouterr().out
    assert "published whisper.encoder generation" in out and ": 30x64 float32" in out
    assert "skipped layer type decoder: a learned table's values are in the checkpoint" in out
    with attach("whisper.encoder", root=root) as tbl:
        assert_matches_oracle(tbl.array, reference.sinusoidal(np.arange(30), 64, layout="t2t"), "float32",
                              angle_max=30.0)
    path.write_text(json.dumps(BLOOM))
    assert main(["table", "build", str(path), "--shm-dir", root]) == 2
    assert "default: the config has no context length: give the positions" in capsys.readouterr().err
    assert main(["table", "build", str(path), "--name", "bloom", "--positions", "0:16", "--shm-dir", root]) == 0
    with attach("bloom", root=root) as tbl:
        slopes = posenc.from_hf_config(BLOOM)["default"].spec.slopes
        np.testing.assert_array_equal(tbl.array, (np.arange(16)[:, None] * slopes).astype(np.float32))
    path.write_text(json.dumps(T5))
    assert main(["table", "build", str(path), "--shm-dir", root]) == 2
    assert "encoder: T5 relative-position buckets depend on key - query" in capsys.readouterr().err


def test_models_positions_covers_every_kind(client):
    for config in (WHISPER, BLOOM, T5, GEMMA3):
        r = client.post("/v1/models/positions", json={"hf_config": config})
        assert r.status_code == 200 and r.json() == posenc.from_hf_config(config).to_dict(), r.text
    r = client.post("/v1/rope/cos_sin", json={"hf_config": T5, "positions": [0]})
    assert r.status_code == 422 and r.json()["error"]["field"] == "hf_config" and "uses no rope" in r.text
    r = client.post("/v1/rope/cos_sin", json={"hf_config": WHISPER, "layer_type": "encoder", "positions": [0]})
    assert r.json()["error"]["field"] == "layer_type" and "uses sinusoidal, not rope" in r.text


# --- M-RoPE over HTTP ----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_mrope_cos_sin_over_http_matches_the_oracle(client, dtype):
    spec = posenc.RopeSpec.from_dict(QWEN2_VL)
    r = client.post("/v1/rope/cos_sin", json={"spec": QWEN2_VL, "positions": POSITIONS.tolist(), "dtype": dtype},
                    headers={"accept": NPY})
    assert r.status_code == 200, r.text
    rows = np.load(io.BytesIO(r.content))
    assert rows.shape == (POSITIONS.shape[1], 128) and rows.dtype == dtype
    assert_matches_oracle(rows, mrope_oracle(spec, POSITIONS), dtype, angle_max=123456.0)
    binary = client.post("/v1/rope/cos_sin", params={"spec": '{"head_dim": 128, "base": 1e6, '
                                                             '"mrope_section": [16, 24, 24]}', "dtype": dtype},
                         content=npy(POSITIONS), headers={"content-type": NPY, "accept": NPY})
    assert binary.content == r.content


def test_mrope_rope_apply_over_http_with_json_and_binary_x(client):
    spec = posenc.RopeSpec.from_dict(QWEN2_VL)
    x = np.random.default_rng(3).standard_normal((2, POSITIONS.shape[1], 128))
    want = posenc.rope_apply(x, POSITIONS, spec)
    r = client.post("/v1/rope/apply", json={"spec": QWEN2_VL, "positions": POSITIONS.tolist(), "x": x.tolist()},
                    headers={"accept": NPY})
    np.testing.assert_array_equal(np.load(io.BytesIO(r.content)), want)
    query = {"spec": '{"head_dim": 128, "base": 1e6, "mrope_section": [16, 24, 24]}',
             "positions": str(POSITIONS.tolist())}
    binary = client.post("/v1/rope/apply", params=query, content=npy(x), headers={"content-type": NPY,
                                                                                 "accept": NPY})
    np.testing.assert_array_equal(np.load(io.BytesIO(binary.content)), want)


def test_positions_in_the_query_of_a_binary_rope_apply_are_used():
    """Regression: with a .npy x body, `positions` from the query were ignored (0..n-1 used)."""
    x = np.ones((2, 8))
    with app_client("posenc-models-") as c:
        r = c.post("/v1/rope/apply", params={"spec": '{"head_dim": 8}', "positions": "[5, 9]"}, content=npy(x),
                   headers={"content-type": NPY, "accept": NPY})
    np.testing.assert_array_equal(np.load(io.BytesIO(r.content)), posenc.rope_apply(x, [5, 9], posenc.RopeSpec(8)))


@pytest.mark.parametrize("body, message", [
    ({"spec": {"head_dim": 8}, "positions": [[1, 2], [3, 4], [5, 6]]}, "which needs a spec with mrope_section"),
    ({"spec": {"head_dim": 8, "mrope_section": [1, 1, 2]}, "positions": [[1, 2], [3, 4]]}, "shape [3, n]"),
])
def test_mrope_position_errors_name_positions(client, body, message):
    r = client.post("/v1/rope/cos_sin", json=body)
    assert r.status_code == 422 and r.json()["error"]["field"] == "positions" and message in r.text


# --- M-RoPE over the binary protocol -------------------------------------------------------------
def test_mrope_over_the_binary_protocol_sync_and_async():
    spec = posenc.RopeSpec(20, mrope_section=[0, 6, 1, 3], scaling={"rope_type": "dynamic", "factor": 2.0},
                           max_position_embeddings=64)  # an empty chunk, a 4th chunk on axis 0, seq_len from all
    positions = np.concatenate([POSITIONS[:, :-1], [[3], [200], [7]]], axis=1)
    cos, sin = posenc.rope_cos_sin(positions, spec, dtype="float64")
    want = np.concatenate([cos, sin], axis=1)
    root = tempfile.mkdtemp(prefix="posenc-models-")
    try:
        with running_server(root, threads=1) as server:
            with Client(server.address) as c:
                got = c.encode_spec(spec, positions, dtype="float64")
            assert_matches_oracle(got, want, "float64", angle_max=200.0)

            async def main():
                async with await AsyncClient.connect(server.address) as a:
                    return await a.encode_spec(spec, positions + 0.5)

            got = asyncio.run(main())
            cos, sin = posenc.rope_cos_sin(positions + 0.5, spec, dtype="float64")
            assert_matches_oracle(got, np.concatenate([cos, sin], axis=1), "float32", angle_max=201.0)
    finally:
        shutil.rmtree(root, ignore_errors=True)
