"""`posenc audit model.gguf --config config.json`: tiny GGUF files written with the `gguf` package the
way llama.cpp's convert_hf_to_gguf.py writes them (RoPE metadata and tensors only, no weights), each
known conversion mistake once; the correct ones are called correct, each mistake is named."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import posenc
from posenc.audit.gguf import audit_gguf, llama_cpp_inv_freq, read_gguf
from posenc.cli import main
from posenc.errors import PosencError

from audit_recipes import config

gguf = pytest.importorskip("gguf")

LLAMA = config("llama-3.1-8b")
QWEN_YARN = config("qwen2-7b-yarn")
PHI3 = config("phi-3-mini-128k")
NEOX = config("gpt-neox-20b")


def llama3_freq_factors(cfg: dict) -> np.ndarray:
    """convert_hf_to_gguf.py LlamaModel.generate_extra_tensors: the divisors that turn plain RoPE into Llama-3's."""
    spec = posenc.RopeSpec.from_hf_config(cfg)
    plain = posenc.RopeSpec(spec.head_dim, base=spec.base)
    return (posenc.rope_inv_freq(plain)[0] / posenc.rope_inv_freq(spec)[0]).astype(np.float32)


def write(path, cfg: dict, *, arch: str, **changes) -> str:
    """A GGUF of `cfg` as the converter writes it; `changes` override (None drops) a key or tensor."""
    heads = cfg["num_attention_heads"]
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    spec = posenc.RopeSpec.from_hf_config(cfg)
    scaling = spec.scaling
    meta = {"context_length": cfg["max_position_embeddings"], "embedding_length": cfg["hidden_size"],
            "head_count": heads, "freq_base": spec.base,
            "dimension_count": spec.rotary_dim if spec.rotary_dim != head_dim else None,
            "scaling_type": None, "factor": None, "original_context": None, "attn_factor": None,
            "rope_freqs": None, "factors_long": None, "factors_short": None}
    if spec.rope_type == "llama3":
        meta["rope_freqs"] = llama3_freq_factors(cfg)
    elif spec.rope_type == "yarn":
        meta.update(scaling_type=gguf.RopeScalingType.YARN, factor=scaling["factor"],
                    original_context=spec.original_max_position_embeddings)
    elif spec.rope_type == "longrope":
        meta.update(scaling_type=gguf.RopeScalingType.LONGROPE, original_context=spec.original_max_position_embeddings,
                    attn_factor=posenc.rope_inv_freq(spec, seq_len=cfg["max_position_embeddings"])[1],
                    factors_long=np.asarray(scaling["long_factor"], np.float32),
                    factors_short=np.asarray(scaling["short_factor"], np.float32))
    meta.update(changes)
    w = gguf.GGUFWriter(str(path), arch)
    w.add_context_length(meta["context_length"])
    w.add_embedding_length(meta["embedding_length"])
    w.add_head_count(meta["head_count"])
    w.add_rope_freq_base(meta["freq_base"])
    if meta["dimension_count"] is not None:
        w.add_rope_dimension_count(meta["dimension_count"])
    if meta["scaling_type"] is not None:
        w.add_rope_scaling_type(meta["scaling_type"])
    if meta["factor"] is not None:
        w.add_rope_scaling_factor(meta["factor"])
    if meta["original_context"] is not None:
        w.add_rope_scaling_orig_ctx_len(meta["original_context"])
    if meta["attn_factor"] is not None:
        w.add_rope_scaling_attn_factors(meta["attn_factor"])
    for name in ("rope_freqs", "factors_long", "factors_short"):
        if meta[name] is not None:
            tensor = {"rope_freqs": "rope_freqs", "factors_long": "rope_factors_long",
                      "factors_short": "rope_factors_short"}[name]
            w.add_tensor(f"{tensor}.weight", np.asarray(meta[name], np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)


def causes(report):
    return [f["cause"] for f in report["findings"]]


@pytest.mark.parametrize("cfg, arch", [(LLAMA, "llama"), (QWEN_YARN, "qwen2"), (PHI3, "phi3"), (NEOX, "gptneox"),
                                       (config("qwen3-8b"), "qwen3"), (config("mistral-7b"), "llama")])
def test_correct_conversions_are_correct(tmp_path, cfg, arch):
    report = audit_gguf(write(tmp_path / "m.gguf", cfg, arch=arch), cfg)
    assert causes(report) == ["correct"], report["findings"]
    assert report["status"] == "correct" and report["error_by_position"][-1]["max_abs_error"] < cfg["max_position_embeddings"] * 2 ** -22  # float32 metadata


def test_llama3_frequencies_equal_hf(tmp_path):
    """The rope_freqs divisors reproduce Llama-3.1's inv_freq to float32 (what llama.cpp then uses)."""
    rope = read_gguf(write(tmp_path / "m.gguf", LLAMA, arch="llama"))
    inv, attention = llama_cpp_inv_freq(rope, rope.context_length)
    want = posenc.rope_inv_freq(posenc.RopeSpec.from_hf_config(LLAMA))[0]
    assert np.max(np.abs(inv / want - 1)) < 2 ** -22 and attention == 1.0


@pytest.mark.parametrize("cfg, arch, changes, cause", [
    (LLAMA, "llama", {"rope_freqs": None}, "scaling_missing"),  # Llama-3's rope_freqs tensor left out
    (LLAMA, "llama", {"freq_base": 10000.0}, "wrong_base"),  # the default base instead of rope_theta
    (NEOX, "gptneox", {"dimension_count": 96}, "wrong_rotary_dim"),  # partial rotary ignored
    (QWEN_YARN, "qwen2", {"scaling_type": None, "factor": None, "original_context": None}, "scaling_missing"),
    (QWEN_YARN, "qwen2", {"factor": 2.0}, "wrong_scaling"),  # YaRN factor
    (QWEN_YARN, "qwen2", {"original_context": 4096}, "wrong_scaling"),  # YaRN's original context length
    (QWEN_YARN, "qwen2", {"scaling_type": gguf.RopeScalingType.LINEAR}, "wrong_scaling"),  # scaling type
    (PHI3, "phi3", {"factors_short": np.asarray(PHI3["rope_scaling"]["long_factor"], np.float32)},
     "wrong_length_variant"),  # long factors written twice
    (PHI3, "phi3", {"factors_long": None, "factors_short": None}, "scaling_missing"),  # LongRoPE tensors left out
    (PHI3, "phi3", {"attn_factor": None}, "attention_factor_missing"),
    (LLAMA, "command-r", {}, "wrong_layout"),  # a NORM architecture the converter does not permute for
])
def test_conversion_mistakes_are_named(tmp_path, cfg, arch, changes, cause):
    report = audit_gguf(write(tmp_path / "m.gguf", cfg, arch=arch, **changes), cfg)
    assert report["status"] == "broken" and report["diagnosis"]["cause"] == cause, report["findings"]


def test_yarn_attention_factor_is_llama_cpps(tmp_path):
    rope = read_gguf(write(tmp_path / "m.gguf", QWEN_YARN, arch="qwen2"))
    _, attention = llama_cpp_inv_freq(rope, rope.context_length)
    assert attention == pytest.approx(0.1 * math.log(4) + 1)


def test_cli_audits_a_gguf(tmp_path, capsys):
    cfg_path = tmp_path / "config.json"
    cfg_path.write_text(json.dumps(LLAMA))
    good = write(tmp_path / "good.gguf", LLAMA, arch="llama")
    assert main(["audit", good, "--config", str(cfg_path)]) == 0
    assert "diagnosis: CORRECT" in capsys.readouterr().out
    bad = write(tmp_path / "bad.gguf", LLAMA, arch="llama", rope_freqs=None)
    assert main(["audit", bad, "--config", str(cfg_path), "--json"]) == 3
    assert json.loads(capsys.readouterr().out)["diagnosis"]["cause"] == "scaling_missing"
    assert main(["audit", good]) == 0  # no config: reported, not judged
    assert "no config" in capsys.readouterr().out


def test_bad_gguf_files(tmp_path):
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF\x03\x00\x00\x00garbage")
    with pytest.raises(PosencError) as info:
        read_gguf(str(broken))
    assert info.value.field == "file"
    short = write(tmp_path / "short.gguf", LLAMA, arch="llama", rope_freqs=np.ones(8, np.float32))
    with pytest.raises(PosencError, match="rope_freqs"):
        read_gguf(short)
    assert main(["audit", str(broken)]) == 2


def test_architecture_of_unknown_rope_type_is_not_layout_checked(tmp_path):
    report = audit_gguf(write(tmp_path / "m.gguf", LLAMA, arch="qwen2vl"), LLAMA)  # M-RoPE: not NORM/NEOX
    assert causes(report) == ["correct"] and report["cache"]["layout"] is None
    assert "not known here" in report["cache"]["notes"][0]
