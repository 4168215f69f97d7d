"""Default names of `posenc table build`: readable, deterministic, valid, and different for different tables."""

import json
import re
from pathlib import Path

import numpy as np
import pytest
from posenc import checkpoint
from posenc.cli import main
from posenc.cli.table_names import checkpoint_name, config_name, spec_name
from posenc.shm import attach
from posenc.shm.paths import NAME_MAX, check_name
from posenc.tables import TableSpec

CONFIGS = Path(__file__).parent / "fixtures" / "hf_configs"
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8192}


def table(encoding: dict, start=0, stop=4096, **kw) -> TableSpec:
    return TableSpec.from_dict({"encoding": encoding, "start": start, "stop": stop, **kw})


@pytest.mark.parametrize("encoding, kw, name", [
    ({"kind": "sinusoidal", "dim": 128}, {}, "sinusoidal-d128-4k"),
    ({"kind": "sinusoidal", "dim": 64, "base": 500.0, "layout": "halves"}, {"start": -8, "stop": 8, "dtype": "float64"},
     "sinusoidal-d64-base500-halves-m8to8-f64"),
    ({"kind": "rope", "head_dim": 128, "base": 10000.0}, {"stop": 131072}, "rope-d128-theta10000-128k"),
    ({"kind": "rope", "head_dim": 128, "base": 1e6, "partial_rotary_factor": 0.5, "layout": "interleaved",
      "scaling": {"rope_type": "linear", "factor": 4}}, {"stop": 1000}, "rope-d128-theta1000000-rot0.5-linearx4-interleaved-1000"),
    ({"kind": "alibi", "n_heads": 32, "variant": "bloom"}, {}, "alibi-h32-bloom-4k"),
    ({"kind": "alibi", "n_heads": 12}, {"start": 5, "stop": 9}, "alibi-h12-5to9"),
])
def test_spec_names_say_the_whole_spec_without_a_hash(encoding, kw, name):
    assert spec_name(table(encoding, **kw)) == name


def test_a_hash_is_added_only_where_the_name_does_not_pin_the_spec():
    llama = table({"kind": "rope", "head_dim": 128, "base": 500000.0, "scaling": LLAMA3}, stop=131072)
    assert spec_name(llama) == f"rope-d128-theta500000-llama3x8-128k-{llama.hash[:6]}"
    other = table({"kind": "rope", "head_dim": 128, "base": 500000.0, "scaling": {**LLAMA3, "high_freq_factor": 2.0}},
                  stop=131072)
    assert spec_name(other).startswith("rope-d128-theta500000-llama3x8-128k-") and spec_name(other) != spec_name(llama)
    scaled = table({"kind": "sinusoidal", "dim": 4, "scale": [1.0, 2.0, 1.0, 1.0]})
    assert spec_name(scaled) == f"sinusoidal-d4-4k-{scaled.hash[:6]}"


def test_names_are_unique_per_table_and_valid():
    tables = [table({"kind": "sinusoidal", "dim": d, "base": b}, start=s, stop=s + n, dtype=dt)
              for d in (8, 128) for b in (10000.0, 500.0, 0.5) for s in (-3, 0) for n in (1024, 1000) for dt in
              ("float32", "float64")]
    tables += [table({"kind": "rope", "head_dim": 64, "base": 1e4, "max_position_embeddings": 4096,
                      "scaling": {"rope_type": "dynamic", "factor": f}}, seq_len=q)
               for f in (2.0, 3.0) for q in (None, 8192.0)]
    names = [spec_name(t) for t in tables]
    assert len(set(names)) == len(set(tables)) == len(tables)
    assert all(check_name(n) == n for n in names)


def test_long_names_are_cut_and_tagged():
    long_dir = {"_name_or_path": "org/" + "x" * 80}
    name = config_name(long_dir, "config.json", (0, 8), "float64", 9.0)
    assert len(name) <= NAME_MAX and re.fullmatch(r"x{32}-8-f64-len9", name)
    tagged = spec_name(table({"kind": "rope", "head_dim": 128, "base": 1.123456789012345, "partial_rotary_factor":
                              0.123456789012345, "scaling": {"rope_type": "linear", "factor": 1.234567890123}},
                             start=-2**31 + 1, stop=-2**31 + 1001))
    assert len(tagged) == NAME_MAX and check_name(tagged)


def test_config_names(tmp_path):
    assert config_name({"_name_or_path": "meta-llama/Llama-3.1-8B"}, "x.json", None, None, None) == "Llama-3.1-8B"
    (tmp_path / "Qwen2 7B").mkdir()
    path = tmp_path / "Qwen2 7B" / "config.json"
    assert config_name({}, str(path), (0, 8192), "float32", None) == "Qwen2-7B-8k"
    assert config_name({}, str(tmp_path / "Qwen2 7B"), None, "float64", 65536.0) == "Qwen2-7B-f64-len65536"
    assert config_name({}, str(tmp_path / "gemma.json"), None, None, None) == "gemma"


def test_checkpoint_names(tmp_path):
    values = np.arange(40, dtype=np.float32).reshape(10, 4)
    spec = checkpoint.learned_table(values, tensor="transformer.wpe.weight")
    digest = checkpoint.values_sha256(values)[:6]
    assert checkpoint_name(str(tmp_path / "gpt2" / "model.safetensors"), spec, None) == f"gpt2-wpe-{digest}"
    assert checkpoint_name(str(tmp_path / "wpe.npy"), checkpoint.learned_table(values), (2, 8)) == f"wpe-2to8-{digest}"


def test_cli_build_uses_the_default_names(tmp_path, capsys):
    root = str(tmp_path / "shm")
    config = tmp_path / "Llama-3.1-8B" / "config.json"
    config.parent.mkdir()
    config.write_text((CONFIGS / "llama-3.1-8b.json").read_text())
    assert main(["table", "build", str(config), "--positions", "0:64", "--shm-dir", root, "--progress", "never"]) == 0
    assert capsys.readouterr().out.startswith("published Llama-3.1-8B-64 generation 1: 64x128 float32")
    spec = json.dumps({"kind": "sinusoidal", "dim": 16})
    assert main(["table", "build", spec, "--positions", "0:2048", "--shm-dir", root, "--progress", "never"]) == 0
    assert capsys.readouterr().out.startswith("published sinusoidal-d16-2k generation 2: ")
    with attach("sinusoidal-d16-2k", root=root) as tbl:
        assert tbl.spec == table({"kind": "sinusoidal", "dim": 16}, stop=2048)
