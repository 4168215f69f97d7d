"""What a user hands from_hf_config (dict, PretrainedConfig, config.json path, model directory),
and the tables a long-context model needs: each built at the lengths that select its rows."""

import json

import numpy as np
import posenc
import pytest
from conftest import hf_config
from posenc.models.tables import context_length, layer_tables
from posenc.tables import serves


def test_a_path_a_directory_and_a_dict_read_the_same(tmp_path):
    config = hf_config("llama-3.1-8b")
    (tmp_path / "config.json").write_text(json.dumps(config))
    want = posenc.from_hf_config(config).to_dict()
    assert posenc.from_hf_config(tmp_path / "config.json").to_dict() == want
    assert posenc.from_hf_config(str(tmp_path)).to_dict() == want
    with pytest.raises(posenc.PosencError) as info:
        posenc.from_hf_config(tmp_path / "missing")
    assert info.value.field == "config" and "cannot read" in info.value.message
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(posenc.PosencError, match="is not JSON"):
        posenc.from_hf_config(tmp_path / "bad.json")


def test_a_pretrained_config_reads_as_its_dict():
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(hidden_size=256, num_attention_heads=4, num_hidden_layers=2,
                                      rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 5e5})
    spec = posenc.from_hf_config(config).get().spec
    assert (spec.head_dim, spec.base, spec.rope_type) == (64, 5e5, "linear")


def _tables(name, **kw):
    config = hf_config(name)
    return layer_tables(posenc.from_hf_config(config), context=context_length(config), **kw)[0]


def test_longrope_builds_a_short_and_a_long_table():
    tables = _tables("phi-3-mini-128k")
    short, long = tables["default.short"], tables["default.long"]
    assert (short.stop, short.seq_len, long.stop, long.seq_len) == (4096, 4096.0, 131072, 131072.0)
    spec = short.encoding
    rows = long.compute(np.array([10, 5000]), np.dtype("float32"))
    cos, sin = posenc.rope_cos_sin([10, 5000], spec, seq_len=131072, dtype="float32")
    np.testing.assert_array_equal(rows, np.concatenate([cos, sin], axis=1))
    assert np.abs(short.compute(np.array([10]), np.dtype("float32")) - rows[:1]).max() > 1e-3  # long factors differ at every position
    assert "up to 4096 tokens (short_factor)" in serves(short.to_dict())
    assert "longer than 4096 tokens (long_factor)" in serves(long.to_dict())


def test_yarn_covers_the_whole_extended_context():
    (table,) = _tables("qwen2-7b-yarn").values()
    assert table.stop == 4 * 32768


def test_dynamic_ntk_serves_the_stated_length():
    config = {**hf_config("llama-3.1-8b"), "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}
    model = posenc.from_hf_config(config)
    (plain,) = layer_tables(model, context=None)[0].values()
    assert (plain.stop, plain.seq_len) == (131072, None)
    assert "up to 131072 tokens" in serves(plain.to_dict())
    (stated,) = layer_tables(model, context=None, seq_len=200_000)[0].values()
    assert (stated.stop, stated.seq_len) == (200_000, 200_000.0)
    assert "exactly 200000 tokens" in serves(stated.to_dict())


def test_llama4_scaling_with_equal_low_and_high_freq_factors():
    spec = posenc.RopeSpec(128, base=5e5, scaling={"rope_type": "llama3", "factor": 16.0, "low_freq_factor": 1.0,
                                                   "high_freq_factor": 1.0, "original_max_position_embeddings": 8192})
    inv, _ = posenc.rope_inv_freq(spec)
    plain, _ = posenc.rope_inv_freq(posenc.RopeSpec(128, base=5e5))
    long = 2 * np.pi / plain > 8192
    np.testing.assert_array_equal(inv[long], plain[long] / 16.0)
    np.testing.assert_array_equal(inv[~long], plain[~long])
