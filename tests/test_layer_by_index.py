"""A layer by index, one answer everywhere: `ModelPositions.layer(i)`, `posenc positions --layer i`,
`"layer": i` in `POST /v1/models/positions` and in the RoPE routes taking `hf_config`, and the CLI's
`--arrangement` (HTTP's `arrangement`), all by the library's own functions.

Before: the library had no per-layer accessor, HTTP answered `{"layer": 5}` with 422 "Extra inputs
are not permitted", and `posenc positions ... --arrangement cat` was "unrecognized arguments"."""

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import hf_config
from serve_support import app_client

import posenc
from posenc.cli import main

CONFIGS = Path(__file__).parent / "fixtures" / "hf_configs"
ROUTES = {"/v1/rope/cos_sin": {"positions": [0, 7, 4096]}, "/v1/rope/inv_freq": {},
          "/v1/rope/apply": {"x": [[1.0] * 256, [0.5] * 256]}}


@pytest.fixture(scope="module")
def client():
    with app_client("posenc-layer-") as c:
        yield c


def cli_json(capsys, *argv) -> dict:
    assert main(["positions", *map(str, argv), "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def cli_error(capsys, *argv) -> str:
    assert main(["positions", *map(str, argv)]) == 2
    return capsys.readouterr().err


def test_library_layer_is_the_layer_type_that_lists_it():
    gemma = posenc.from_hf_config(hf_config("gemma-3-1b"))
    assert gemma.layer(5) is gemma["full_attention"] and gemma.layer(np.int64(4)) is gemma["sliding_attention"]
    for index in range(26):
        assert index in gemma.layer(index).layers
    with pytest.raises(posenc.PosencError, match=r"lists layer 26: .* \(layers with positions: 0-25\)"):
        gemma.layer(26)
    with pytest.raises(posenc.PosencError, match="must be a layer index"):
        gemma.layer("5")
    qwen3_next = posenc.from_hf_config(hf_config("qwen3-next-80b-a3b"))  # linear-attention layers: no positions
    with pytest.raises(posenc.PosencError, match=r"^layer: layer 0 of this qwen3_next model applies no positions"):
        qwen3_next.layer(0)
    gpt2 = posenc.from_hf_config(hf_config("gpt2"))
    with pytest.raises(posenc.PosencError, match="not per layer"):
        gpt2.layer(0)


@pytest.mark.parametrize("layer", [0, 5, 11])
def test_cli_http_and_library_agree_on_a_layer(client, capsys, tmp_path, layer):
    config = hf_config("gemma-3-1b")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    entry = posenc.from_hf_config(config).layer(layer)
    cli = cli_json(capsys, path, "--positions", "0,7,4096", "--layer", layer)
    assert list(cli["layer_types"]) == [entry.layer_type]
    summary = client.post("/v1/models/positions", json={"hf_config": config, "layer": layer})
    assert summary.status_code == 200, summary.text
    assert summary.json()["layer_types"] == {entry.layer_type: entry.to_dict()}
    cos, sin = posenc.rope_cos_sin([0, 7, 4096], entry.spec)
    assert np.array_equal(np.array(cli["layer_types"][entry.layer_type]["values"]["cos"], np.float32), cos)
    for route, extra in ROUTES.items():
        by_layer = client.post(route, json={"hf_config": config, "layer": layer, **extra})
        by_type = client.post(route, json={"hf_config": config, "layer_type": entry.layer_type, **extra})
        assert by_layer.status_code == 200 and by_layer.content == by_type.content, (route, by_layer.text)
    rows = np.array(client.post("/v1/rope/cos_sin", json={"hf_config": config, "layer": layer, "dtype": "float32",
                                                          **ROUTES["/v1/rope/cos_sin"]}).json()["data"], np.float32)
    assert np.array_equal(rows, np.concatenate([cos, sin], axis=1))


def test_a_layer_without_positions_is_the_same_refusal_everywhere(client, capsys, tmp_path):
    config = hf_config("qwen3-next-80b-a3b")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with pytest.raises(posenc.PosencError) as err:
        posenc.from_hf_config(config).layer(0)
    assert f"posenc: error: {err.value}" in cli_error(capsys, path, "--positions", "1", "--layer", 0)
    for route, body in [("/v1/models/positions", {"hf_config": config, "layer": 0}),
                        ("/v1/rope/cos_sin", {"hf_config": config, "layer": 0, "positions": [1]})]:
        r = client.post(route, json=body)
        assert r.status_code == 422, r.text
        assert r.json()["error"]["field"] == "layer" and r.json()["error"]["message"] == str(err.value), route


def test_layer_needs_hf_config_and_excludes_layer_type(client):
    config = hf_config("gemma-3-1b")
    spec = posenc.from_hf_config(config)["full_attention"].spec.to_dict()
    alone = client.post("/v1/rope/cos_sin", json={"spec": spec, "layer": 5, "positions": [1]})
    assert alone.status_code == 422 and alone.json()["error"]["message"] == "layer: applies to hf_config only"
    both = client.post("/v1/rope/cos_sin", json={"hf_config": config, "layer": 5, "layer_type": "full_attention",
                                                 "positions": [1]})
    assert both.status_code == 422 and both.json()["error"]["field"] == "layer", both.text
    not_rope = client.post("/v1/rope/inv_freq", json={"hf_config": hf_config("bloom-560m"), "layer": 0})
    assert not_rope.status_code == 422 and "uses alibi, not rope" in not_rope.json()["error"]["message"]


@pytest.mark.parametrize("arrangement", ["freq", "cat", "interleave"])
def test_cli_arrangement_is_the_library_s_and_http_s(client, capsys, tmp_path, arrangement):
    config = hf_config("llama-3.1-8b")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    doc = cli_json(capsys, path, "--positions", "0,1,131071", "--arrangement", arrangement)
    got = doc["layer_types"]["default"]["values"]
    cos, sin = posenc.rope_cos_sin([0, 1, 131071], posenc.from_hf_config(config)["default"].spec,
                                   arrangement=arrangement)
    assert doc["arrangement"] == arrangement and np.array(got["cos"]).shape == cos.shape
    assert np.array_equal(np.array(got["cos"], np.float32), cos) and np.array_equal(np.array(got["sin"], np.float32), sin)
    r = client.post("/v1/rope/cos_sin", json={"hf_config": config, "positions": [0, 1, 131071],
                                              "arrangement": arrangement})
    assert np.array_equal(np.array(r.json()["data"], np.float32), np.concatenate([cos, sin], axis=1))


def test_cli_arrangement_refusals(capsys):
    llama = posenc.from_hf_config(hf_config("llama-3.1-8b"))
    with pytest.raises(posenc.PosencError) as err:
        posenc.rope_cos_sin([1], llama["default"].spec, arrangement="halves")
    message = cli_error(capsys, CONFIGS / "llama-3.1-8b.json", "--positions", "1", "--arrangement", "halves")
    assert message == f"posenc: error: arrangement: layer type 'default': {err.value.message}\n"
    message = cli_error(capsys, CONFIGS / "bloom-560m.json", "--positions", "1", "--arrangement", "cat")
    assert message == "posenc: error: arrangement: lays out RoPE's cos and sin; the layer types shown use ['alibi']\n"
