"""Models, and layers, without positions: posenc says they have none, everywhere it answers.

The truth (which layers apply positions) is in the goldens (tests/test_models_truth.py: Jamba,
Mamba, Granite-4 hybrids, Zamba2, Bamba are judged there). This file checks how "none" is
said: by the library (`without`, a clear PosencError for a request that needs an encoding), the
`posenc positions` and `posenc table build` commands, and POST /v1/models/positions.
"""

import json

import posenc
import pytest
from posenc.cli import main
from serve_support import app_client

#: A Granite-4.0-H config.json as IBM publishes it: NoPE attention ("nope") among Mamba-2 layers.
GRANITE_4_H = {"model_type": "granitemoehybrid", "hidden_size": 1536, "num_attention_heads": 12,
               "num_hidden_layers": 4, "position_embedding_type": "nope", "rope_theta": 10000,
               "layer_types": ["mamba", "attention", "mamba", "attention"], "max_position_embeddings": 131072}
#: Zamba2 (use_mem_rope as Zyphra's configs set it): the shared attention of its "hybrid" layers.
ZAMBA2 = {"model_type": "zamba2", "hidden_size": 64, "num_attention_heads": 4, "attention_head_dim": 32,
          "num_hidden_layers": 4, "layers_block_type": ["mamba", "hybrid", "mamba", "hybrid"],
          "use_mem_rope": True, "rope_theta": 10000, "max_position_embeddings": 4096}
JAMBA = {"model_type": "jamba", "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32,
         "attn_layer_period": 8, "attn_layer_offset": 4, "max_position_embeddings": 262144}


def test_a_model_without_positions_says_so():
    for config in (GRANITE_4_H, {**GRANITE_4_H, "position_embedding_type": None}, {**ZAMBA2, "use_mem_rope": False},
                   JAMBA):
        model = posenc.from_hf_config(config)
        assert model.encodings == {} and model.without == tuple(range(config["num_hidden_layers"]))
        assert model.to_dict()["layers_without_positions"] == list(model.without)
        with pytest.raises(posenc.PosencError, match="applies no positions") as info:
            model.get()
        assert info.value.field == "layer_type"
        with pytest.raises(posenc.PosencError, match="no positions in any layer"):
            posenc.RopeSpec.from_hf_config(config)


def test_granite_4_h_with_rope_rotates_its_attention_layers_only():
    model = posenc.from_hf_config({**GRANITE_4_H, "position_embedding_type": "rope"})
    assert [e.layers for e in model.encodings.values()] == [(1, 3)] and model.without == (0, 2)


def test_zamba2_rotates_the_hybrid_layers_over_the_attention_head():
    model = posenc.from_hf_config(ZAMBA2)
    entry = model.get()
    assert entry.layers == (1, 3) and entry.spec.head_dim == 32 and model.without == (0, 2)
    # the width its config class derives when attention_head_dim is absent: 2 * hidden // heads
    derived = {k: v for k, v in ZAMBA2.items() if k != "attention_head_dim"}
    assert posenc.from_hf_config(derived).get().spec.head_dim == 32
    # any layer kind but "hybrid" is a Mamba layer in its modeling code
    other = posenc.from_hf_config({**ZAMBA2, "layers_block_type": ["full_attention", "hybrid", "mamba", "hybrid"]})
    assert other.get().layers == (1, 3)


def test_positions_command_lists_no_layer_type(capsys, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(GRANITE_4_H))
    assert main(["positions", str(path), "--positions", "0,1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["layer_types"] == {} and doc["layers_without_positions"] == [0, 1, 2, 3]
    assert main(["positions", str(path), "--positions", "0"]) == 0
    assert "layer types none: no layer applies positions" in capsys.readouterr().out
    assert main(["positions", str(path), "--positions", "0", "--layer", "1"]) == 2
    assert "layer: this granitemoehybrid model applies no positions" in capsys.readouterr().err


def test_table_build_refuses_with_the_reason(capsys, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(JAMBA))
    assert main(["table", "build", str(path), "--shm-dir", str(tmp_path)]) == 2
    assert "config: this jamba model applies no positions" in capsys.readouterr().err


@pytest.fixture(scope="module")
def client():
    with app_client("posenc-nopos-") as c:
        yield c


def test_http_models_positions_and_a_request_that_needs_an_encoding(client):
    r = client.post("/v1/models/positions", json={"hf_config": GRANITE_4_H})
    assert r.status_code == 200, r.text
    assert r.json() == posenc.from_hf_config(GRANITE_4_H).to_dict()
    assert r.json()["layers_without_positions"] == [0, 1, 2, 3]
    r = client.post("/v1/rope/cos_sin", json={"hf_config": GRANITE_4_H, "positions": [0]})
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["field"] == "hf_config" and "no positions in any layer" in error["message"]


def test_table_build_reads_a_model_directory(capsys, tmp_path):
    """`table build DIR` reads DIR/config.json, as `positions` and `from_hf_config` do."""
    model = tmp_path / "granite-4.0-h-rope"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({**GRANITE_4_H, "position_embedding_type": "rope"}))
    assert main(["table", "build", str(model), "--positions", "0:16", "--shm-dir", str(tmp_path / "shm")]) == 0
    assert "published granite-4.0-h-rope-16 generation 1: 16x128 float32" in capsys.readouterr().out


def test_position_keys_of_a_model_without_position_modules_are_not_read():
    """Nothing in Jamba's modeling code reads a rope key: one in its config.json changes nothing."""
    model = posenc.from_hf_config({**JAMBA, "rope_theta": 10000.0, "rope_scaling": {"rope_type": "linear",
                                                                                     "factor": 2.0}})
    assert model.encodings == {} and len(model.without) == 32


def test_a_json_text_given_as_a_path_is_a_clear_error(capsys):
    """A config.json's text where a path is expected (too long a name for the file system) is a
    PosencError naming `config`, not an OSError; `table build` still takes JSON text itself."""
    text = json.dumps({**JAMBA, "padding": "x" * 400})
    with pytest.raises(posenc.PosencError) as info:
        posenc.from_hf_config(text)
    assert info.value.field == "config" and "cannot read" in info.value.message
    assert main(["positions", text, "--positions", "0"]) == 2
    assert "posenc: error: config: cannot read" in capsys.readouterr().err
