"""`posenc positions CONFIG --positions ...` (and `posenc demo --model-config`): a config's values at chosen
positions, per layer type, checked against the library's own functions on real configs."""

import json
import shutil
from pathlib import Path

import ml_dtypes
import numpy as np
import posenc
import pytest
from posenc.cli import main
from posenc.tables import TableSpec

CONFIGS = Path(__file__).parent / "fixtures" / "hf_configs"
POSITIONS = [0, 1, 4096]


def run_json(capsys, *argv):
    assert main(["positions", *map(str, argv), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def library_cos_sin(config, layer_type, positions, **kwargs):
    spec = posenc.from_hf_config(CONFIGS / config)[layer_type].spec
    return posenc.rope_cos_sin(positions, spec, **kwargs)


def test_gemma3_every_layer_type_with_its_layers_and_the_library_values(capsys):
    doc = run_json(capsys, CONFIGS / "gemma-3-1b.json", "--positions", "0,1,4096")
    assert doc["model_type"] == "gemma3_text" and doc["positions"] == POSITIONS
    assert list(doc["layer_types"]) == ["full_attention", "sliding_attention"]
    full, sliding = doc["layer_types"]["full_attention"], doc["layer_types"]["sliding_attention"]
    assert full["layers"] == [5, 11, 17, 23] and len(sliding["layers"]) == 22
    assert full["spec"]["base"] == 1e6 and sliding["spec"]["base"] == 1e4
    assert doc["layers_without_positions"] == []
    for name, entry in doc["layer_types"].items():
        cos, sin = library_cos_sin("gemma-3-1b.json", name, POSITIONS)
        assert np.array_equal(np.array(entry["values"]["cos"], np.float32), cos)
        assert np.array_equal(np.array(entry["values"]["sin"], np.float32), sin)
    assert not np.array_equal(full["values"]["cos"], sliding["values"]["cos"])


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float64"])
def test_dtype_and_one_layer_by_index(capsys, dtype):
    doc = run_json(capsys, CONFIGS / "gemma-3-1b.json", "--positions", "4096,7", "--layer", "5", "--dtype", dtype)
    assert list(doc["layer_types"]) == ["full_attention"]
    cos, sin = library_cos_sin("gemma-3-1b.json", "full_attention", [4096, 7], dtype=dtype)
    got = doc["layer_types"]["full_attention"]["values"]
    assert np.array_equal(np.array(got["cos"]).astype(cos.dtype).view(np.uint8), cos.view(np.uint8))
    assert np.array_equal(np.array(got["sin"]).astype(sin.dtype).view(np.uint8), sin.view(np.uint8))


def test_nope_layers_are_listed(capsys):
    """Command-R7B (cohere2): full-attention layers use no positions; the sliding ones rotate, interleaved."""
    doc = run_json(capsys, CONFIGS / "command-r7b.json", "--positions", "0,1,4096")
    assert doc["layers_without_positions"] == [3, 7, 11, 15, 19, 23, 27, 31]
    sliding = doc["layer_types"]["sliding_attention"]
    assert sliding["apply"] == "interleaved" and 3 not in sliding["layers"]
    cos, _ = library_cos_sin("command-r7b.json", "sliding_attention", POSITIONS)
    assert np.array_equal(np.array(sliding["values"]["cos"], np.float32), cos)
    main(["positions", str(CONFIGS / "command-r7b.json"), "--positions", "0"])
    assert "layers without positions (NoPE): 3, 7, 11, 15, 19, 23, 27, 31" in capsys.readouterr().out


def test_longrope_frequencies_follow_the_length_or_seq_len(capsys):
    """Phi-3-mini-128k: max position + 1 = 4097 > 4096 selects the long factors; --seq-len chooses."""
    doc = run_json(capsys, CONFIGS / "phi-3-mini-128k.json", "--positions", "0,1,4096")
    entry = doc["layer_types"]["default"]
    assert any("seq_len 4097" in line for line in entry["about"])
    cos, _ = library_cos_sin("phi-3-mini-128k.json", "default", POSITIONS)
    assert np.array_equal(np.array(entry["values"]["cos"], np.float32), cos)
    short = run_json(capsys, CONFIGS / "phi-3-mini-128k.json", "--positions", "0,1,4096", "--seq-len", "4096")
    cos_short, _ = library_cos_sin("phi-3-mini-128k.json", "default", POSITIONS, seq_len=4096)
    assert np.array_equal(np.array(short["layer_types"]["default"]["values"]["cos"], np.float32), cos_short)
    assert not np.array_equal(cos_short, cos)


def test_non_rope_kinds(capsys):
    bloom = run_json(capsys, CONFIGS / "bloom-560m.json", "--positions", "0,5")["layer_types"]["default"]
    spec = posenc.from_hf_config(CONFIGS / "bloom-560m.json")["default"].spec
    rows = TableSpec(spec, 0, 6).compute(np.array([0.0, 5.0]), np.dtype(np.float32))
    assert np.array_equal(np.array(bloom["values"]["bias"], np.float32), rows)
    assert np.allclose(rows[1], 5 * posenc.alibi_slopes(16, variant="bloom"), rtol=1e-7)
    t5 = run_json(capsys, CONFIGS / "t5-small.json", "--positions=-3,0,5")["layer_types"]
    for name in ("encoder", "decoder"):
        t5_spec = posenc.from_hf_config(CONFIGS / "t5-small.json")[name].spec
        expected = posenc.t5_relative_position_bucket(np.array([-3, 0, 5]), t5_spec)
        assert np.array(t5[name]["values"]["bucket"]).ravel().tolist() == expected.tolist()
    gpt2 = run_json(capsys, CONFIGS / "gpt2.json", "--positions", "0,1023")["layer_types"]["default"]
    assert gpt2["values"]["checkpoint_row"] == [[0], [1023]] and gpt2["layers"] == []


def test_model_directory_and_terminal_output(capsys, tmp_path):
    shutil.copy(CONFIGS / "gemma-3-1b.json", tmp_path / "config.json")
    assert main(["positions", str(tmp_path), "--positions", "1", "--layer-type", "sliding_attention"]) == 0
    out = capsys.readouterr().out
    cos, _ = library_cos_sin("gemma-3-1b.json", "sliding_attention", [1])
    assert "sliding_attention: rope (half), layers 0-4, 6-10, 12-16, 18-22, 24-25" in out
    assert "full_attention:" not in out.split("\n", 1)[1]
    assert f"1: [{float(cos[0, 0]):.8f} {float(cos[0, 1]):.8f}" in out
    assert "sin (float32):" in out and '"base": 10000.0' in out


def test_the_reading_s_notes_are_printed(capsys):
    """Kimi-K2 read through its architecture: the JSON and the terminal say so."""
    doc = run_json(capsys, CONFIGS / "kimi-k2-instruct.json", "--positions", "0,1")
    assert doc["notes"] == list(posenc.from_hf_config(CONFIGS / "kimi-k2-instruct.json").notes)
    assert main(["positions", str(CONFIGS / "kimi-k2-instruct.json"), "--positions", "1"]) == 0
    assert "note: model type 'kimi_k2' is not one transformers" in capsys.readouterr().out


def test_demo_config_is_positions(capsys):
    """demo --model-config (before: --config) used to refuse Gemma-3 without a layer type; it is now
    `positions` at 0, 1, 4096."""
    assert main(["demo", "--model-config", str(CONFIGS / "gemma-3-1b.json")]) == 0
    demo = capsys.readouterr().out
    assert main(["positions", str(CONFIGS / "gemma-3-1b.json"), "--positions", "0,1,4096"]) == 0
    assert demo == capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["gemma-3-1b.json", "--positions", "0,x"], "positions: must be comma-separated numbers, got 'x'"),
    (["gemma-3-1b.json", "--positions", "0", "--layer-type", "global"], "layer_type: unknown layer type 'global'"),
    (["gemma-3-1b.json", "--positions", "0", "--layer", "26"], ("layer: no layer type of this gemma3_text model "
                                                              "lists layer 26: it applies no positions, or there "
                                                              "is no such layer (layers with positions: 0-25)")),
    (["gemma-3-1b.json", "--positions", "0", "--layer", "1", "--layer-type", "x"], "layer: give --layer-type or"),
    (["gpt2.json", "--positions", "1024"], ("positions: layer type 'default': a learned table holds integer "
                                           "positions 0..1023")),
    (["t5-small.json", "--positions", "0.5"], "layer type 'encoder': must be integers"),
    (["missing.json", "--positions", "0"], "config: cannot read"),
])
def test_refusals_exit_2_with_the_message(capsys, argv, message):
    assert main(["positions", str(CONFIGS / argv[0]), *argv[1:]]) == 2
    assert message in capsys.readouterr().err


def test_refused_config_says_why(capsys, tmp_path):
    (tmp_path / "c.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
                                                 "rope_scaling": {"rope_type": "llama3", "factor": "x"}}))
    assert main(["positions", str(tmp_path / "c.json"), "--positions", "0"]) == 2
    assert "posenc: error: config.rope_scaling" in capsys.readouterr().err


def test_bfloat16_prints(capsys):
    assert main(["positions", str(CONFIGS / "llama-3.1-8b.json"), "--positions", "1", "--dtype", "bfloat16"]) == 0
    cos, _ = posenc.rope_cos_sin([1], posenc.RopeSpec.from_hf_config(json.loads(
        (CONFIGS / "llama-3.1-8b.json").read_text())), dtype="bfloat16")
    assert cos.dtype == ml_dtypes.bfloat16
    assert f"1: [{float(cos[0, 0])!r} " in capsys.readouterr().out  # 0.5390625: exact, as numpy prints it


def test_demo_without_config_points_to_positions(capsys):
    assert main(["demo"]) == 0
    assert capsys.readouterr().out.endswith("posenc positions CONFIG --positions 0,1,4096 (CONFIG: its config.json)\n")
