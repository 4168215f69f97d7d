"""`posenc audit model.gguf --model-config config.json`: tiny GGUF files written the way llama.cpp's
convert_hf_to_gguf.py writes them for real HF configs (tests/gguf_converter.py: each class's keys, types
and RoPE tensors; no weights), judged as llama.cpp's loader reads them. Correct conversions are called
correct, each conversion mistake is named, and what cannot be told from the metadata is said."""

from __future__ import annotations

import json
import math
import struct
import tempfile
from pathlib import Path

import numpy as np
import posenc
import pytest
from audit_recipes import config
from gguf_converter import converted, write
from hypothesis import given
from hypothesis import strategies as st
from posenc.audit.gguf import audit_gguf, llama_cpp_inv_freq, read_gguf, softmax_mscale
from posenc.audit.gguf_file import open_gguf
from posenc.cli import main
from posenc.errors import PosencError

LLAMA = config("llama-3.1-8b")
QWEN_YARN = config("qwen2-7b-yarn")
PHI3 = config("phi-3-mini-128k")
NEOX = config("gpt-neox-20b")
DEEPSEEK = config("deepseek-v2-lite")
GEMMA3 = config("gemma-3-1b")
GEMMA2 = config("gemma-2-9b")
VICUNA = config("vicuna-7b-16k")  # linear x4


def causes(report):
    return [f["cause"] for f in report["findings"]]


def audit(tmp_path, cfg, **changes):
    return audit_gguf(write(tmp_path / "m.gguf", cfg, **changes), cfg)


CONVERTED = ["llama-3.1-8b", "mistral-7b", "mixtral-8x7b", "codellama-7b", "vicuna-7b-16k", "baichuan2-7b-base",
             "qwen2-7b-yarn", "qwen3-8b", "qwen1.5-moe-a2.7b", "qwen3-30b-a3b", "phi-3-mini-128k", "phi-4-mini",
             "deepseek-v2-lite", "deepseek-v3", "gemma-7b", "gemma-2-9b", "gemma-3-1b", "gemma-3-4b",
             "gemma-3-27b-text-v5", "falcon-7b", "gpt-neox-20b", "stablelm-2-1.6b", "stablelm-3b-4e1t", "olmo-2-7b",
             "command-r"]


@pytest.mark.parametrize("name", CONVERTED)
def test_converter_output_is_correct(tmp_path, name):
    """Every architecture covered, written as the converter writes it for the real config: correct."""
    cfg = config(name)
    report = audit(tmp_path, cfg)
    assert causes(report) == ["correct"], report["findings"]
    assert report["status"] == "correct"
    assert report["error_by_position"][-1]["max_abs_error"] < report["gguf"]["context_length"] * 2 ** -22


def test_phi3_128k_without_scaling_type_is_longrope_as_llama_cpp_applies_it(tmp_path):
    """Phi3MiniModel writes the factor tensors and rope.scaling.attn_factor but no rope.scaling.type: llama.cpp
    reads linear (factor 1) and applies the long/short factors by context (get_rope_factors) all the same."""
    arch, keys, tensors = converted(PHI3)
    assert arch == "phi3" and "rope.scaling.type" not in keys and set(tensors) == {"rope_factors_long",
                                                                                    "rope_factors_short"}
    report = audit(tmp_path, PHI3)
    assert report["status"] == "correct", report["findings"]
    gguf = report["gguf"]
    assert gguf["rope.scaling.type"] == "linear" and "phi3.rope.scaling.type" in gguf["defaults"]
    assert gguf["freq_scale"] == 1.0 and gguf["tensors"] == ["rope_factors_long", "rope_factors_short"]
    want, attention = posenc.rope_inv_freq(posenc.RopeSpec.from_hf_config(PHI3), seq_len=131072)
    assert np.max(np.abs(np.array(gguf["inv_freq"]) / want - 1)) < 2 ** -21
    assert report["cache"]["attention_factor"] == pytest.approx(attention, rel=1e-7)


def test_phi35_moe_as_converted_has_another_attention_factor(tmp_path):
    """Phi-3.5-MoE's config gives LongRoPE long_mscale / short_mscale 1.2432, which transformers' PhimoeRotaryEmbedding
    multiplies cos and sin by; Phi3MiniModel (PhiMoeModel's base) writes sqrt(1 + ln 32 / ln 4096) = 1.1902 as
    rope.scaling.attn_factor whatever the config says: llama.cpp computes another attention factor."""
    cfg = config("phi-3.5-moe")
    report = audit(tmp_path, cfg)
    assert causes(report) == ["wrong_attention_factor"], report["findings"]
    assert "1.19024" in report["diagnosis"]["evidence"] and "1.24316" in report["diagnosis"]["evidence"]
    assert cfg["rope_scaling"]["long_mscale"] == pytest.approx(1.24316, abs=1e-5)


def test_deepseek_v2_lite_reads_yarn_log_multiplier(tmp_path):
    """DeepseekV2Model writes rope.scaling.yarn_log_multiplier = 0.1 * mscale_all_dim (0.0707); llama.cpp divides
    the 0.1 out, keeps the rotation's magnitude at mscale/mscale_all_dim = 1 and scales q.k by mscale^2, as
    transformers' DeepseekV2 attention does."""
    from transformers import DeepseekV2Config
    from transformers.models.deepseek_v2.modeling_deepseek_v2 import (
        DeepseekV2Attention,
        DeepseekV2RotaryEmbedding,
    )

    _, keys, _ = converted(DEEPSEEK)
    assert keys["rope.scaling.yarn_log_multiplier"][0] == pytest.approx(0.0707)
    path = write(tmp_path / "m.gguf", DEEPSEEK)
    report = audit_gguf(path, DEEPSEEK)
    assert report["status"] == "correct", report["findings"]
    hf = DeepseekV2Config(**{k: v for k, v in DEEPSEEK.items() if k not in ("architectures", "model_type")})
    rope = read_gguf(path)
    assert llama_cpp_inv_freq(rope, rope.context_length)[1] == pytest.approx(
        DeepseekV2RotaryEmbedding(hf).attention_scaling, rel=1e-7)
    q_head = hf.qk_nope_head_dim + hf.qk_rope_head_dim
    assert softmax_mscale(rope) == pytest.approx(DeepseekV2Attention(hf, 0).scaling * math.sqrt(q_head), rel=1e-6)


@pytest.mark.parametrize("changes, cause", [
    ({"rope.scaling.yarn_log_multiplier": None}, "wrong_attention_factor"),  # left out: YaRN's own 1 + 0.1 ln 40
    ({"rope.scaling.yarn_log_multiplier": 0.707}, "wrong_softmax_scale"),  # not x0.1: q.k scaled by 1 + 0.707 ln 40
])
def test_deepseek_yarn_log_multiplier_mistakes(tmp_path, changes, cause):
    report = audit(tmp_path, DEEPSEEK, **changes)
    assert report["status"] == "broken" and report["diagnosis"]["cause"] == cause, report["findings"]


def ministral3() -> dict:
    """Ministral-3's config as transformers' Ministral3Config gives it (YaRN x16 over 16384, mscale_all_dim 1)."""
    from transformers import Ministral3Config

    return {**Ministral3Config().to_dict(), "architectures": ["Ministral3ForCausalLM"]}


def test_ministral3_reads_yarn_log_multiplier_as_written(tmp_path):
    """Ministral3Model writes mscale_all_dim itself (not x0.1) and mistral3's loader reads it so: llama.cpp's
    attention factor mscale/mscale_all_dim = 1, as transformers'; DeepSeek's x0.1 there would be 1.243."""
    cfg = ministral3()
    _, keys, _ = converted(cfg)
    assert keys["rope.scaling.yarn_log_multiplier"][0] == 1.0
    report = audit(tmp_path, cfg)
    assert report["status"] == "correct" and report["cache"]["attention_factor"] == pytest.approx(1.0), \
        report["findings"]
    wrong = audit(tmp_path, cfg, **{"rope.scaling.yarn_log_multiplier": 0.1})
    assert wrong["diagnosis"]["cause"] == "wrong_attention_factor" and "1.24" in wrong["diagnosis"]["evidence"]


def test_missing_scaling_type_is_linear_as_llama_cpp_reads_it(tmp_path):
    """llama.cpp's loader defaults rope.scaling.type to "linear": a factor without a type scales linearly (a
    file the old reading called unscaled), and the report says what llama.cpp computes, not "none"."""
    report = audit(tmp_path, VICUNA, **{"rope.scaling.type": None})
    assert report["status"] == "correct", report["findings"]
    assert report["gguf"]["rope.scaling.type"] == "linear" and report["gguf"]["freq_scale"] == 0.25
    assert "llama.cpp's default" in report["gguf"]["scaling"]
    llama3 = audit(tmp_path, LLAMA)["inferred"]["description"]  # rope_freqs divisors, no type, no factor
    assert "linear (rope.scaling.type absent: llama.cpp's default): frequency scale 1" in llama3
    none = audit(tmp_path, VICUNA, **{"rope.scaling.type": "none"})  # type none: llama.cpp ignores the factor
    assert none["diagnosis"]["cause"] == "scaling_missing", none["findings"]


def test_sliding_window_base_as_llama_cpp_reads_it(tmp_path):
    """Gemma-3's local layers: rope.freq_base_swa (the converter writes rope_local_base_freq), 10000 when absent;
    a wrong one is named for the sliding layers. Gemma-2's loader reads the same key (default: freq_base)."""
    _, keys, _ = converted(GEMMA3)
    assert keys["rope.freq_base_swa"][0] == 10000.0 and keys["rope.freq_base"][0] == 1e6
    wrong = audit(tmp_path, GEMMA3, **{"rope.freq_base_swa": 1e6})
    assert wrong["status"] == "broken" and wrong["diagnosis"]["cause"] == "wrong_base", wrong["findings"]
    assert "sliding_attention" in wrong["diagnosis"]["evidence"] and "1e+06" in wrong["diagnosis"]["evidence"]
    assert audit(tmp_path, GEMMA3, **{"rope.freq_base_swa": None})["status"] == "correct"  # gemma3's default
    groups = {g["layers"]: g for g in audit(tmp_path, GEMMA3)["gguf"]["groups"]}
    assert groups["swa"]["count"] == 22 and groups["full"]["count"] == 4 and groups["swa"]["freq_base"] == 1e4
    gemma2 = audit(tmp_path, GEMMA2, **{"rope.freq_base_swa": 1e6})
    assert gemma2["diagnosis"]["cause"] == "wrong_base" and "sliding-window" in gemma2["diagnosis"]["evidence"]


def test_full_layers_of_gemma3_scaled_not_the_local_ones(tmp_path):
    """Gemma-3-4B: linear x8 on the global layers only (llama.cpp's SWA layers keep frequency scale 1)."""
    cfg = config("gemma-3-4b")
    groups = {g["layers"]: g for g in audit(tmp_path, cfg)["gguf"]["groups"]}
    assert groups["full"]["freq_scale"] == 0.125 and groups["swa"]["freq_scale"] == 1.0
    report = audit(tmp_path, cfg, **{"rope.scaling.factor": None, "rope.scaling.type": None})
    assert report["diagnosis"]["cause"] == "scaling_missing" and "full_attention" in report["diagnosis"]["evidence"]


def test_model_under_another_architecture_cannot_be_confirmed(tmp_path):
    """A Qwen2 model (HF halves) written under arch llama: llama.cpp rotates adjacent pairs, right only if q/k
    were permuted, which the metadata cannot show; the converter writes Qwen2 as qwen2."""
    report = audit(tmp_path, QWEN_YARN, arch="llama")
    assert report["status"] == "warning" and causes(report) == ["layout_unconfirmed"], report["findings"]
    evidence = report["diagnosis"]["evidence"]
    assert "writes Qwen2ForCausalLM as 'qwen2'" in evidence and "cannot be confirmed" in evidence
    llama_as_cohere = audit(tmp_path, LLAMA, arch="command-r")
    assert causes(llama_as_cohere) == ["layout_unconfirmed"]


def test_converter_pairing_that_differs_from_the_model_is_wrong_layout(tmp_path):
    """DeepSeek-V3 with rope_interleave false rotates halves; the converter writes q/k unpermuted under deepseek2,
    whose NORM rotation pairs adjacent dims: llama.cpp computes another rotation than the model."""
    cfg = config("deepseek-v3-rope-interleave-false")
    report = audit(tmp_path, cfg)
    assert report["status"] == "broken" and report["diagnosis"]["cause"] == "wrong_layout", report["findings"]
    assert "DeepseekV3ForCausalLM as 'deepseek2' with q/k as HF stores them" in report["diagnosis"]["evidence"]


def test_yarn_keys_llama_cpp_does_not_read(tmp_path):
    """convert_hf_to_gguf.py writes rope.scaling.yarn_beta_fast, but only grok's and mistral3's loaders read it:
    llama.cpp rotates a qwen2 file with beta_fast 32 whatever the key says."""
    cfg = {**QWEN_YARN, "rope_scaling": {**QWEN_YARN["rope_scaling"], "beta_fast": 16.0}}
    path = write(tmp_path / "m.gguf", cfg)
    rope = read_gguf(path)
    assert rope.written["rope.scaling.yarn_beta_fast"] == 16.0 and rope.beta_fast == 32.0
    assert any("does not read it for architecture 'qwen2'" in n for n in rope.notes)
    assert audit_gguf(path, cfg)["diagnosis"]["cause"] == "wrong_scaling"


@pytest.mark.parametrize("cfg, changes, cause", [
    (LLAMA, {"rope_freqs": None}, "scaling_missing"),  # Llama-3's rope_freqs tensor left out
    (LLAMA, {"rope.freq_base": 10000.0}, "wrong_base"),  # the default base instead of rope_theta
    (LLAMA, {"rope.freq_base": None}, "wrong_base"),  # not written: llama.cpp's 10000
    (NEOX, {"rope.dimension_count": 96}, "wrong_rotary_dim"),  # partial rotary ignored
    (QWEN_YARN, {"rope.scaling.type": None, "rope.scaling.factor": None,
                 "rope.scaling.original_context_length": None}, "scaling_missing"),
    (QWEN_YARN, {"rope.scaling.factor": 2.0}, "wrong_scaling"),  # YaRN factor
    (QWEN_YARN, {"rope.scaling.original_context_length": 4096}, "wrong_scaling"),  # YaRN's original context
    (QWEN_YARN, {"rope.scaling.type": "linear"}, "wrong_scaling"),  # scaling type
    (PHI3, {"rope_factors_short": PHI3["rope_scaling"]["long_factor"]}, "wrong_length_variant"),  # long twice
    (PHI3, {"rope_factors_long": None, "rope_factors_short": None}, "scaling_missing"),  # tensors left out
    (PHI3, {"rope.scaling.attn_factor": None}, "attention_factor_missing"),
])
def test_conversion_mistakes_are_named(tmp_path, cfg, changes, cause):
    report = audit(tmp_path, cfg, **changes)
    assert report["status"] == "broken" and report["diagnosis"]["cause"] == cause, report["findings"]


def test_llama3_frequencies_equal_hf(tmp_path):
    """The converter's float32 rope_freqs divisors reproduce Llama-3.1's inv_freq to float32."""
    rope = read_gguf(write(tmp_path / "m.gguf", LLAMA))
    inv, attention = llama_cpp_inv_freq(rope, rope.context_length)
    want = posenc.rope_inv_freq(posenc.RopeSpec.from_hf_config(LLAMA))[0]
    assert np.max(np.abs(inv / want - 1)) < 2 ** -22 and attention == 1.0


def test_yarn_attention_factor_is_llama_cpps(tmp_path):
    rope = read_gguf(write(tmp_path / "m.gguf", QWEN_YARN))
    _, attention = llama_cpp_inv_freq(rope, rope.context_length)
    assert attention == pytest.approx(0.1 * math.log(4) + 1)


def test_head_of_a_file_is_enough(tmp_path):
    """The metadata and the RoPE tensors (which the converter writes first) are all the audit reads: the first
    bytes of a file do; a RoPE tensor past them is named with the bytes that would hold it."""
    data = Path(write(tmp_path / "m.gguf", LLAMA, pad=1 << 20)).read_bytes()
    head = data[:4096]
    report = audit_gguf(head, LLAMA)
    assert report["status"] == "correct" and "first 4096 bytes" in report["cache"]["notes"][-1]
    late = Path(write(tmp_path / "late.gguf", LLAMA, pad=1 << 20, rope_last=True)).read_bytes()
    with pytest.raises(PosencError, match=r"send at least the first \d+ bytes") as info:
        audit_gguf(late[:4096], LLAMA)
    assert info.value.field == "rope_freqs.weight"
    with pytest.raises(PosencError, match="inside the GGUF key/values") as info:
        audit_gguf(data[:200], LLAMA)
    assert info.value.field == "file"


def test_big_endian_file_reads_the_same(tmp_path):
    import gguf

    little = open_gguf(write(tmp_path / "m.gguf", LLAMA))
    path = tmp_path / "be.gguf"
    arch, keys, tensors = converted(LLAMA)
    w = gguf.GGUFWriter(str(path), arch, endianess=gguf.GGUFEndian.BIG)
    for name, (value, kind) in keys.items():
        w.add_key_value(name if name.startswith("general.") else f"{arch}.{name}", value, kind)
    w.add_tensor("rope_freqs.weight", tensors["rope_freqs"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    big = open_gguf(str(path))
    assert big.fields == little.fields
    assert np.array_equal(big.tensor("rope_freqs.weight"), little.tensor("rope_freqs.weight"))


def test_cli_audits_a_gguf(tmp_path, capsys):
    cfg_path = tmp_path / "config.json"
    cfg_path.write_text(json.dumps(LLAMA))
    good = write(tmp_path / "good.gguf", LLAMA)
    assert main(["audit", good, "--model-config", str(cfg_path)]) == 0
    assert "diagnosis: CORRECT" in capsys.readouterr().out
    bad = write(tmp_path / "bad.gguf", LLAMA, rope_freqs=None)
    assert main(["audit", bad, "--model-config", str(cfg_path), "--json"]) == 3
    assert json.loads(capsys.readouterr().out)["diagnosis"]["cause"] == "scaling_missing"
    assert main(["audit", good]) == 0  # no config: reported, not judged
    assert "no config" in capsys.readouterr().out


def test_bad_gguf_files(tmp_path):
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF\x03\x00\x00\x00garbage")
    with pytest.raises(PosencError) as info:
        read_gguf(str(broken))
    assert info.value.field == "file"
    old = tmp_path / "v1.gguf"
    old.write_bytes(b"GGUF\x01\x00\x00\x00" + bytes(16))
    with pytest.raises(PosencError, match="version 1"):
        read_gguf(str(old))
    short = write(tmp_path / "short.gguf", LLAMA, rope_freqs=np.ones(8, np.float32))
    with pytest.raises(PosencError, match="rope_freqs"):
        read_gguf(short)
    unknown = write(tmp_path / "type.gguf", LLAMA, **{"rope.scaling.type": "ntk"})
    with pytest.raises(PosencError, match="llama.cpp refuses to load") as info:
        read_gguf(unknown)
    assert info.value.field == "llama.rope.scaling.type"
    assert main(["audit", str(broken)]) == 2


@pytest.mark.parametrize("cfg, arch, cause, words", [
    (LLAMA, "qwen2vl", "layout_unconfirmed", "MROPE"),  # llama.cpp's M-RoPE: not NORM or NEOX
    (LLAMA, "not-an-arch", "layout_unconfirmed", "not in posenc's copy of llama.cpp's rope-type table"),
    ({k: v for k, v in LLAMA.items() if k != "architectures"}, "llama", "layout_unconfirmed", "no `architectures`"),
    (LLAMA, "gpt2", "wrong_layout", "applies no rotary embedding"),  # rope type NONE
])
def test_pairing_llama_cpp_cannot_or_does_not_match(tmp_path, cfg, arch, cause, words):
    path = write(tmp_path / "m.gguf", LLAMA, arch=arch)
    report = audit_gguf(path, cfg)
    assert report["diagnosis"]["cause"] == cause and words in report["diagnosis"]["evidence"], report["findings"]
    assert report["status"] == ("warning" if cause == "layout_unconfirmed" else "broken")


_FUZZ_DIR = tempfile.TemporaryDirectory(prefix="posenc-gguf-")  # removed when the session ends
FUZZED = {name: Path(write(Path(_FUZZ_DIR.name) / f"{name}.gguf", config(name))).read_bytes()
          for name in ("llama-3.1-8b", "phi-3-mini-128k", "gemma-3-1b", "deepseek-v2-lite")}


def judged_or_refused(data: bytes, cfg: dict | None) -> None:
    try:
        report = audit_gguf(data, cfg)
    except PosencError as exc:
        assert exc.field and exc.message
        return
    assert report["status"] in ("correct", "warning", "broken")
    json.dumps(report)


@given(name=st.sampled_from(sorted(FUZZED)), cut=st.integers(0, 1 << 16),
       flips=st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)), max_size=8), with_config=st.booleans())
def test_damaged_files_are_judged_or_refused(name, cut, flips, with_config):
    """Any truncation and byte changes of a converter-written file: a report, or a PosencError naming the field."""
    data = bytearray(FUZZED[name])
    for at, value in flips:
        data[at % len(data)] = value
    judged_or_refused(bytes(data[:len(data) - cut % len(data)]), config(name) if with_config else None)


KEY_VALUES = st.one_of(st.integers(-2, 2 ** 40), st.floats(allow_nan=True, allow_infinity=True, width=32),
                       st.sampled_from(["x", "yarn", "none", "longrope"]), st.lists(st.integers(0, 8), max_size=4),
                       st.lists(st.booleans(), max_size=40))
ROPE_KEYS = ["context_length", "embedding_length", "attention.head_count", "attention.key_length", "block_count",
             "rope.dimension_count", "rope.freq_base", "rope.freq_base_swa", "rope.scaling.type", "rope.scaling.factor",
             "rope.scale_linear", "rope.scaling.original_context_length", "rope.scaling.attn_factor",
             "rope.scaling.yarn_log_multiplier", "rope.scaling.yarn_beta_fast", "rope.scaling.yarn_ext_factor",
             "attention.sliding_window", "attention.sliding_window_pattern"]


@given(name=st.sampled_from(sorted(FUZZED)), arch=st.sampled_from([None, "grok", "mistral3", "gemma2", "olmo2"]),
       key=st.sampled_from(ROPE_KEYS), value=KEY_VALUES)
def test_any_value_of_a_rope_key_is_judged_or_refused(tmp_path_factory, name, arch, key, value):
    try:
        path = write(tmp_path_factory.mktemp("k") / "m.gguf", config(name), arch=arch, **{key: value})
    except (ValueError, OverflowError, TypeError, struct.error):  # GGUFWriter cannot write it (an int over uint32 ...)
        return
    judged_or_refused(Path(path).read_bytes(), config(name))
