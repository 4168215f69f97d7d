"""posenc.audit names what is wrong with caches broken the ways real frameworks break them, and
calls a correct cache correct. The recipes (tests/audit_recipes.py) build each broken cache."""

from __future__ import annotations

import io
import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import posenc
from posenc.audit import audit_arrays, audit_bytes, to_text
from posenc.errors import PosencError

from audit_recipes import (bf16_positions, config, exact, from_position_one, half, hf_llama, interleaved,
                           interleaved_read_as_half, positions_cast, stored, textbook_float32,
                           without_attention_factor)

N = 16384
LLAMA = config("llama-3.1-8b", max_position_embeddings=N)
LLAMA_SPEC = posenc.RopeSpec.from_hf_config(LLAMA)
QWEN_YARN = config("qwen2-7b-yarn")
GPTJ = config("gpt-j-6b")


def causes(report: dict) -> list[str]:
    return [f["cause"] for f in report["findings"]]


def primary(report: dict) -> str:
    return report["diagnosis"]["cause"]


@pytest.fixture(scope="module")
def llama_exact():
    return exact(LLAMA_SPEC, np.arange(N))


@pytest.mark.parametrize("with_config", [True, False])
def test_correct_cache_is_correct(llama_exact, with_config):
    report = audit_arrays(llama_exact, LLAMA if with_config else None)
    assert report["status"] == "correct" and causes(report) == ["correct"]
    assert report["cache"]["layout"] == "half" and report["cache"]["rotary_dim"] == 128
    assert report["cache"]["position_offset"] == 0 and report["cache"]["attention_factor"] == pytest.approx(1.0)
    # Without a config the audit still recognises Llama-3.1's scaling from the frequencies alone.
    assert report["inferred"]["rope_type"] == "llama3" and report["inferred"]["base"] == 500000.0
    assert max(r["max_abs_error"] for r in report["error_by_position"]) < 1.2e-7


def test_textbook_float32_cache():
    report = audit_arrays(textbook_float32(N, 64))
    assert primary(report) == "float32_angles" and report["diagnosis"]["confidence"] == "high"
    assert report["inferred"]["description"] == "default, base 10000"
    errors = [r["max_abs_error"] for r in report["error_by_position"]]
    assert errors[-1] > 30 * errors[0]  # grows with position: the signature


@pytest.mark.parametrize("with_config", [True, False])
def test_hf_float32_angles(with_config):
    pytest.importorskip("transformers")
    report = audit_arrays(hf_llama(LLAMA, N), LLAMA if with_config else None)
    assert causes(report) == ["float32_angles"]


@pytest.mark.parametrize("with_config", [True, False])
def test_positions_cast_to_bfloat16(with_config):
    report = audit_arrays(bf16_positions(LLAMA_SPEC, N), LLAMA if with_config else None)
    assert causes(report) == ["bf16_positions"] and report["diagnosis"]["confidence"] == "high"
    first = report["error_by_position"][0]
    assert first["from"] == 0 and first["to"] == 256 and first["max_abs_error"] < 1e-4  # exact below 256


def test_positions_cast_to_float16():
    assert causes(audit_arrays(positions_cast(LLAMA_SPEC, N, np.float16), LLAMA)) == ["fp16_positions"]


@pytest.mark.parametrize("dtype, cause", [(np.float16, "fp16_storage"), (ml_dtypes.bfloat16, "bf16_storage")])
def test_cache_stored_in_half_precision(llama_exact, dtype, cause):
    report = audit_arrays(stored(llama_exact, dtype), LLAMA)
    assert causes(report) == [cause] and report["status"] == "warning"
    # Rounded to float16 then kept as float32: the values still lie on the float16 grid.
    if dtype is np.float16:
        report = audit_arrays(stored(stored(llama_exact, dtype), np.float32))
        assert causes(report) == [cause] and "grid" in report["diagnosis"]["evidence"]


def test_interleaved_cache_for_a_half_model(llama_exact):
    cache = {k: interleaved(v[:, :64]) for k, v in llama_exact.items()}
    report = audit_arrays(cache, LLAMA)
    assert report["cache"]["layout"] == "interleaved" and causes(report) == ["wrong_layout"]


def test_half_cache_for_an_interleaved_model():
    spec = posenc.RopeSpec.from_hf_config(GPTJ)
    report = audit_arrays(exact(spec, np.arange(2048)), GPTJ)
    assert causes(report) == ["wrong_layout"] and "interleaved" in report["diagnosis"]["evidence"]


def test_interleaved_read_as_half():
    report = audit_arrays(interleaved_read_as_half(posenc.RopeSpec.from_hf_config(GPTJ), 2048), GPTJ)
    assert primary(report) == "interleaved_read_as_half"


def test_base_1e4_for_a_5e5_model():
    plain = config("llama-3.1-8b", rope_scaling=None, max_position_embeddings=N)
    report = audit_arrays(exact(posenc.RopeSpec(128, base=1e4), np.arange(N)), plain)
    assert causes(report) == ["wrong_base"]
    assert "10000" in report["diagnosis"]["evidence"] and "500000" in report["diagnosis"]["evidence"]


def test_scaling_missing(llama_exact):
    plain = exact(posenc.RopeSpec(128, base=5e5), np.arange(N))
    assert causes(audit_arrays(plain, LLAMA)) == ["scaling_missing"]


@pytest.mark.parametrize("with_config, confidence", [(True, "high"), (False, "medium")])
def test_yarn_without_attention_factor(with_config, confidence):
    spec = posenc.RopeSpec.from_hf_config(QWEN_YARN)
    report = audit_arrays(without_attention_factor(spec, 32768), QWEN_YARN if with_config else None)
    assert causes(report) == ["attention_factor_missing"]
    assert report["diagnosis"]["confidence"] == confidence
    assert report["inferred"]["rope_type"] == "yarn"


def test_yarn_with_its_attention_factor_is_correct():
    spec = posenc.RopeSpec.from_hf_config(QWEN_YARN)
    report = audit_arrays(exact(spec, np.arange(32768)), QWEN_YARN)
    assert causes(report) == ["correct"]
    assert report["cache"]["attention_factor"] == pytest.approx(0.1 * np.log(4) + 1, rel=1e-6)


@pytest.mark.parametrize("with_config, confidence", [(True, "high"), (False, "medium")])
def test_positions_from_one(with_config, confidence):
    report = audit_arrays(from_position_one(LLAMA_SPEC, N), LLAMA if with_config else None)
    assert causes(report) == ["position_offset"] and report["cache"]["position_offset"] == 1
    assert report["diagnosis"]["confidence"] == confidence


def test_declared_start_is_not_an_offset():
    cache = exact(LLAMA_SPEC, np.arange(1000, 1000 + N))
    assert causes(audit_arrays(cache, None, start=1000)) == ["correct"]


def test_truncated_cache(llama_exact):
    cfg = config("llama-3.1-8b")  # max_position_embeddings 131072
    report = audit_arrays(llama_exact, cfg)
    assert causes(report) == ["truncated"] and report["status"] == "warning"


def test_unexplained_error_is_no_known_cause(llama_exact):
    noise = np.random.default_rng(0).normal(0, 1e-3, (N, 64))
    cache = {k: half(v[:, :64] + noise).astype(np.float32) for k, v in llama_exact.items()}
    assert primary(audit_arrays(cache, LLAMA)) == "no_known_cause"


def test_rotated_q_before_and_after():
    torch = pytest.importorskip("torch")
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    n = 4096
    cfg = config("llama-3.1-8b", max_position_embeddings=n)
    spec = posenc.RopeSpec.from_hf_config(cfg)
    q = np.random.default_rng(1).normal(size=(1, 4, n, 128)).astype(np.float32)
    good = audit_arrays({"q": q, "q_rot": posenc.rope_apply(q, np.arange(n), spec)}, cfg)
    assert causes(good) == ["correct"] and good["cache"]["source"].startswith("q rotation (half")
    hf = hf_llama(cfg, n)
    qt = torch.from_numpy(q)
    rotated, _ = apply_rotary_pos_emb(qt, qt, torch.from_numpy(hf["cos"])[None], torch.from_numpy(hf["sin"])[None])
    assert causes(audit_arrays({"q": q, "q_rot": rotated.numpy()}, cfg)) == ["float32_angles"]


def test_rotated_q_in_the_wrong_pairing():
    spec = posenc.RopeSpec.from_hf_config(GPTJ)
    q = np.random.default_rng(2).normal(size=(2, 2048, 256)).astype(np.float32)
    report = audit_arrays({"q": q, "q_rot": posenc.rope_apply(q, np.arange(2048), spec, layout="half")}, GPTJ)
    assert causes(report) == ["wrong_layout"] and report["cache"]["rotary_dim"] == 64


def _npy(a: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, a)
    return out.getvalue()


def test_file_formats_agree(llama_exact, tmp_path):
    from safetensors.numpy import save

    cos, sin = llama_exact["cos"], llama_exact["sin"]
    k = cos.shape[1] // 2
    reports = [
        audit_bytes(_npy(cos), _npy(sin), config=LLAMA),
        audit_bytes(save({"rope.cos_cached": cos, "rope.sin_cached": sin}), config=LLAMA),
        audit_bytes(_npy(np.stack([cos, sin])), config=LLAMA),
        audit_bytes(_npy(np.concatenate([cos[:, :k], sin[:, :k]], axis=1)), config=LLAMA),  # vLLM cos_sin_cache
        audit_bytes(_npy((cos[:, :k] + 1j * sin[:, :k]).astype(np.complex64)), config=LLAMA),  # freqs_cis
    ]
    np.savez(tmp_path / "c.npz", cos=cos, sin=sin)
    reports.append(audit_bytes((tmp_path / "c.npz").read_bytes(), config=LLAMA))
    assert all(causes(r) == ["correct"] for r in reports), [causes(r) for r in reports]


def test_text_report(llama_exact):
    text = to_text(audit_arrays(stored(llama_exact, np.float16), LLAMA))
    assert "cache stored in float16" in text and "fix:" in text and "positions" in text


@pytest.mark.parametrize("data, field", [
    (b"not a file", "file"),
    (b"\x93NUMPY\x01\x00" + b"v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (100000000000, 2), }".ljust(118) + b"\n",
     "file"),
    (b"\x10\x00\x00\x00\x00\x00\x00\x00{\"a\": 1}        ", "file"),
])
def test_bad_files_are_posenc_errors(data, field):
    with pytest.raises(PosencError) as info:
        audit_bytes(data)
    assert info.value.field.startswith(field)


def test_bad_arrays_are_posenc_errors():
    with pytest.raises(PosencError, match="cos\\^2"):
        audit_arrays({"cos": np.ones((64, 8), np.float32), "sin": np.linspace(0, 1, 512, dtype=np.float32).reshape(64, 8)})
    with pytest.raises(PosencError, match="no column changes"):
        audit_arrays({"cos": np.ones((64, 8), np.float32), "sin": np.ones((64, 8), np.float32)})
    with pytest.raises(PosencError, match="at least"):
        audit_arrays({"cos": np.ones((2, 8), np.float32), "sin": np.zeros((2, 8), np.float32)})
    with pytest.raises(PosencError, match="floating"):
        audit_arrays({"cos": np.ones((64, 8), np.int32), "sin": np.zeros((64, 8), np.int32)})
    with pytest.raises(PosencError) as info:  # a config without RoPE (BLOOM: ALiBi) has nothing to compare
        audit_arrays(exact(LLAMA_SPEC, np.arange(64)), {"model_type": "bloom", "n_head": 8})
    assert info.value.field.startswith("config")


@pytest.mark.parametrize("dtype, cause", [(ml_dtypes.bfloat16, "bf16_angles"), (np.float16, "fp16_angles")])
@pytest.mark.parametrize("with_config", [True, False])
def test_angles_formed_in_half_precision(dtype, cause, with_config):
    from audit_recipes import angles_in

    report = audit_arrays(angles_in(LLAMA_SPEC, 4096, dtype), LLAMA if with_config else None)
    assert primary(report) == cause, causes(report)


def test_attention_factor_applied_twice():
    from audit_recipes import attention_twice

    spec = posenc.RopeSpec.from_hf_config(QWEN_YARN)
    report = audit_arrays(attention_twice(spec, 32768), QWEN_YARN)
    assert causes(report) == ["wrong_attention_factor"] and "applied twice" in report["diagnosis"]["evidence"]


def test_partial_rotary_ignored():
    neox = config("gpt-neox-20b")  # head_dim 96, partial_rotary_factor 0.25: 12 frequencies
    full = exact(posenc.RopeSpec(96, base=10000.0), np.arange(2048))  # Llama's default ignores it: 48
    report = audit_arrays(full, neox)
    assert primary(report) == "wrong_rotary_dim" and "48" in report["diagnosis"]["evidence"]


def test_wrong_scaling_variant():
    linear = posenc.RopeSpec(128, base=5e5, scaling={"rope_type": "linear", "factor": 8.0})
    report = audit_arrays(exact(linear, np.arange(N)), LLAMA)
    assert causes(report) == ["wrong_scaling"] and "linear" in report["diagnosis"]["evidence"]
    assert report["inferred"]["rope_type"] == "linear"


def test_several_layer_types_pick_the_matching_one():
    from audit_recipes import GEMMA3

    local = posenc.from_hf_config(GEMMA3)["sliding_attention"].spec
    report = audit_arrays(exact(local, np.arange(4096)), GEMMA3)
    assert report["expected"]["layer_type"] == "sliding_attention"
    assert causes(report) == ["truncated"]  # right values, 4096 of 32768 rows
    report = audit_arrays(exact(local, np.arange(4096)), GEMMA3, layer_type="full_attention")
    assert primary(report) == "wrong_base"


# --- Issue 25: never confidently wrong, every row seen -------------------------------------------------------------
LONG = 131072


def test_correct_float64_cache_is_correct():
    """float64 p * inv_freq carries a few ulp of its angle (4.5e-13 at 131072): that is correct, not broken."""
    from audit_recipes import float64_angles

    cfg = config("llama-3.1-8b", rope_scaling=None)
    report = audit_arrays(float64_angles(LONG, 128, 5e5), cfg)
    assert causes(report) == ["correct"], report["findings"]


DYNAMIC = config("llama-3.1-8b", rope_scaling={"rope_type": "dynamic", "factor": 2.0}, rope_theta=10000.0,
                 max_position_embeddings=4096)


def test_hf_dynamic_ntk_grown_to_the_cache_length():
    """HF's dynamic module at 16384 positions grows its frequencies to seq_len 16384: right, only float32 angles."""
    from audit_recipes import hf_rope

    pytest.importorskip("transformers")
    report = audit_arrays(hf_rope(DYNAMIC, N), DYNAMIC)
    assert causes(report) == ["float32_angles"], report["findings"]


@pytest.mark.parametrize("seq_len", [None, 8192])  # never grew (init), grew to another length
def test_dynamic_ntk_at_another_length(seq_len):
    from audit_recipes import at_seq_len

    spec = posenc.RopeSpec.from_hf_config(DYNAMIC)
    report = audit_arrays(at_seq_len(spec, N, seq_len), DYNAMIC)
    assert primary(report) == "wrong_length_variant", report["findings"]
    assert report["status"] == "broken" and report["expected"]["seq_len"] == N


def test_longrope_short_factor_beyond_the_original_length():
    from audit_recipes import at_seq_len

    phi3 = config("phi-3-mini-128k")
    spec = posenc.RopeSpec.from_hf_config(phi3)
    report = audit_arrays(at_seq_len(spec, 8192, None), phi3)  # short factors over 8192 rows (> 4096)
    assert primary(report) == "wrong_length_variant", report["findings"]
    assert "short_factor" in report["diagnosis"]["evidence"]
    good = audit_arrays(at_seq_len(spec, 8192, 8192), phi3)
    assert causes(good) == ["truncated"]  # long factors: right values, 8192 of 131072 rows


@pytest.mark.parametrize("with_config", [True, False])
def test_inv_freq_rounded_to_bfloat16(with_config):
    """`model.to(torch.bfloat16)` rounds the HF module's inv_freq buffer to bfloat16 (so does candle)."""
    import torch

    from audit_recipes import hf_rope

    cfg = config("llama-3.1-8b", max_position_embeddings=4096, rope_scaling=None)
    report = audit_arrays(hf_rope(cfg, 4096, dtype=torch.bfloat16), cfg if with_config else None)
    assert primary(report) == "bf16_inv_freq", report["findings"]
    assert "bf16_storage" in causes(report)



def _long_exact():
    cfg = config("llama-3.1-8b")
    return cfg, exact(posenc.RopeSpec.from_hf_config(cfg), np.arange(LONG))


@pytest.mark.parametrize("damage", ["nan", "inf", "sign", "sign_second_copy", "above_one"])
def test_every_row_is_checked(damage):
    cfg, cache = _long_exact()
    cos = cache["cos"].copy()
    row = 70001
    if damage == "nan":
        cos[row, 3] = np.nan
    elif damage == "inf":
        cos[row, 3] = np.inf
    elif damage == "sign":
        cos[row, 5] = -cos[row, 5]
    elif damage == "sign_second_copy":
        cos[row, 64 + 5] = -cos[row, 64 + 5]
    else:
        cos[row, 7] = 1.5
    report = audit_arrays({"cos": cos, "sin": cache["sin"]}, cfg)
    assert report["status"] == "broken", report["findings"]
    assert str(row) in report["diagnosis"]["evidence"]
    expected = "corrupt_rows" if damage in ("nan", "inf", "above_one") else "no_known_cause"
    assert primary(report) == expected
    worst = next(r for r in report["error_by_position"] if r["from"] <= row < r["to"])
    assert worst["max_abs_error"] > 0.1 and worst["rows_checked"] == 65536  # every row of [65536, 131072)


def test_random_angles_name_no_cause():
    from audit_recipes import random_angles

    report = audit_arrays(random_angles(4096, 64))
    assert causes(report) == ["no_known_cause"], report["findings"]
    assert report["diagnosis"]["confidence"] == "low"


def test_q_length_is_not_a_cache_length():
    cfg = config("llama-3.1-8b")  # max_position_embeddings 131072
    q = np.random.default_rng(3).normal(size=(1, 2, 2048, 128)).astype(np.float32)
    rotated = posenc.rope_apply(q, np.arange(2048), posenc.RopeSpec.from_hf_config(cfg))
    assert causes(audit_arrays({"q": q, "q_rot": rotated}, cfg)) == ["correct"]


def test_hf_float32_angles_stored_in_float16():
    """float32 angles' error (~1e-3 at 16384) barely above float16's rounding: still explained, not unknown."""
    pytest.importorskip("transformers")
    report = audit_arrays(stored(hf_llama(LLAMA, N), np.float16), LLAMA)
    assert causes(report) == ["float32_angles", "fp16_storage"], report["findings"]


def test_meta_freqs_cis_in_complex64():
    """Meta's llama: torch.polar(ones, outer(t, inv_freq)) in float32, saved as complex64."""
    torch = pytest.importorskip("torch")
    inv = torch.from_numpy(posenc.rope_inv_freq(LLAMA_SPEC)[0].astype(np.float32))
    freqs = torch.outer(torch.arange(N, dtype=torch.float32), inv)
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs).numpy()
    assert causes(audit_arrays({"freqs_cis": freqs_cis}, LLAMA)) == ["float32_angles"]


# --- Issue 35: the audit's wrong cases --------------------------------------------------------------------------
QWEN3 = config("qwen3-8b")  # plain RoPE at base 1e6
QWEN3_SPEC = posenc.RopeSpec.from_hf_config(QWEN3)


def test_torch_arange_in_bfloat16_is_bf16_positions():
    """torch.arange(n, dtype=torch.bfloat16) rounds some rows past 4096 to the neighbour below the nearest
    bfloat16 value (it adds the index within a vector to the vector's rounded start): still positions held in
    bfloat16, not an unknown cause."""
    from audit_recipes import arange_in_bfloat16

    report = audit_arrays(arange_in_bfloat16(QWEN3_SPEC, N), QWEN3)
    assert primary(report) == "bf16_positions", report["findings"]
    assert "wrong_base" not in causes(report)


@pytest.mark.parametrize("start", [300, 1000, 20000])
def test_decode_positions_cast_to_bfloat16(start):
    """A decode step's position_ids cast to the model dtype: every row from the first is rounded (rows repeat
    from row 1), so the frequency fit has no clean prefix; the config's frequencies still read the positions."""
    from audit_recipes import position_ids_in_model_dtype

    cache = position_ids_in_model_dtype(QWEN3_SPEC, start, 4096)
    report = audit_arrays(cache, QWEN3, start=start)
    assert primary(report) == "bf16_positions", report["findings"]
    assert report["cache"]["position_offset"] == 0
    undeclared = audit_arrays(cache, QWEN3)  # the same rows without the start: an offset, and bfloat16 positions
    assert causes(undeclared)[:2] == ["position_offset", "bf16_positions"], undeclared["findings"]
    assert undeclared["cache"]["position_offset"] == start


def test_surer_findings_rank_first():
    """Within a severity the diagnosis is the cause with the strongest evidence: one a simulation reproduces
    (high) before one read off fitted frequencies (medium)."""
    from posenc.audit import Finding

    fitted = Finding("wrong_base", "the frequencies fit base 990000", "medium")
    simulated = Finding("bf16_positions", "simulating it leaves 2e-4", "high")
    warning = Finding("bf16_storage", "the file is bfloat16", severity="warning")
    assert sorted([warning, fitted, simulated], key=lambda f: f.rank) == [simulated, fitted, warning]


GGML = np.load(Path(__file__).parent / "golden" / "ggml_rope.npz")
QWEN_YARN_ORIGINAL = 32768
YARN_MSCALE = 1 + 0.1 * np.log(4.0)  # Qwen2-7B YaRN factor 4


def _ggml_setup(name: str) -> dict:
    params = json.loads(bytes(GGML[f"{name}.params"]))
    factors = GGML.get(f"{name}.freq_factors")
    return {"n_dims": params.pop("n_dims"), "freq_base": params.pop("freq_base"), "freq_factors": factors, **params}


@pytest.mark.parametrize("name", ["qwen2_yarn", "llama3", "plain"])
def test_llama_cpp_recipe_is_ggml(name):
    """The recipe reproduces real ggml's rope (tests/golden/generate_ggml_rope.py ran ggml_rope_ext) to the last
    bit of the angle: cos and sin within one float32 rounding of ggml's (its cosf against cos of the float32 angle)."""
    from audit_recipes import llama_cpp_rope

    cos, sin = llama_cpp_rope(GGML["positions"], **_ggml_setup(name))
    for ours, theirs in ((cos, GGML[f"{name}.cos"]), (sin, GGML[f"{name}.sin"])):
        assert np.all(np.abs(ours - theirs) <= np.spacing(np.float32(2.0))), name


def _llama_cpp_cache(name: str, n: int, **overrides) -> dict:
    from audit_recipes import llama_cpp_rope

    cos, sin = llama_cpp_rope(np.arange(n), **{**_ggml_setup(name), **overrides})
    return {"cos": half(cos), "sin": half(sin)}


@pytest.mark.parametrize("name, cfg", [("qwen2_yarn", QWEN_YARN), ("llama3", config("llama-3.1-8b")),
                                       ("plain", config("llama-3.1-8b", rope_theta=1e4, head_dim=64,
                                                        rope_scaling=None))])
def test_a_correct_llama_cpp_cache_is_llama_cpps_arithmetic(name, cfg):
    """llama.cpp multiplies theta up frequency by frequency in float32: the config's values as llama.cpp
    computes them, named as its arithmetic (a warning), never an unknown or a wrong cause."""
    report = audit_arrays(_llama_cpp_cache(name, 32768), cfg)
    assert [c for c in causes(report) if c != "truncated"] == ["llama_cpp_angles"], report["findings"]
    assert report["status"] == "warning"


def test_llama_cpp_yarn_with_the_attention_factor_twice():
    """--yarn-attn-factor (or rope.scaling.attn_factor) set to YaRN's mscale, which ggml's rope_yarn multiplies
    in again: the factor applied twice."""
    report = audit_arrays(_llama_cpp_cache("qwen2_yarn", 32768, attn_factor=YARN_MSCALE), QWEN_YARN)
    assert causes(report) == ["wrong_attention_factor", "llama_cpp_angles"], report["findings"]
    assert "applied twice" in report["diagnosis"]["evidence"]


@pytest.mark.parametrize("base, dim, form", [(1e4, 128, "exp_log"), (1e6, 96, "div_term"), (5e6, 80, "div_term"),
                                             (1e6, 128, "exp_log")])
def test_float64_cache_from_exp_log_is_correct(base, dim, form):
    """inv_freq = exp(-ln(base) x) in float64 is up to ~3 |ln inv_freq| ulp off base ** -x (28 ulp at base 1e9):
    within the float64 tolerance, which grows with |ln inv_freq| (docs/audit.md, "The tolerance model")."""
    from audit_recipes import float64_exp_log

    cfg = {"model_type": "llama", "hidden_size": 8 * dim, "num_attention_heads": 8, "head_dim": dim,
           "num_hidden_layers": 2, "rope_theta": base, "max_position_embeddings": LONG}
    report = audit_arrays(float64_exp_log(LONG, dim, base, form), cfg)
    assert causes(report) == ["correct"], report["findings"]


def test_a_float64_cache_from_a_float32_inv_freq_is_not_correct():
    """The float64 tolerance still sees the smallest real fault: inv_freq kept in float32 (2^-24 relative),
    with every angle and cos/sin in float64."""
    cfg = config("llama-3.1-8b", rope_scaling=None)
    inv = posenc.rope_inv_freq(posenc.RopeSpec.from_hf_config(cfg))[0].astype(np.float32).astype(np.float64)
    angle = np.arange(LONG, dtype=np.float64)[:, None] * inv[None, :]
    report = audit_arrays({"cos": half(np.cos(angle)), "sin": half(np.sin(angle))}, cfg)
    assert report["status"] == "broken" and "correct" not in causes(report), report["findings"]


@pytest.mark.parametrize("build, expected", [("exact", ["transposed"]), ("hf", ["float32_angles", "transposed"]),
                                             ("bf16_positions", ["bf16_positions", "transposed"])])
def test_a_transposed_cache_says_so(build, expected):
    """cos and sin stored [dim, n] (as `torch.outer(inv_freq, t)` builds them): the rows are frequencies, which
    no cause explains; the audit says the arrays are transposed and audits them [n, dim]."""
    n = 4096
    cfg = config("llama-3.1-8b", max_position_embeddings=n)
    spec = posenc.RopeSpec.from_hf_config(cfg)
    cache = {"exact": lambda: exact(spec, np.arange(n)), "hf": lambda: hf_llama(cfg, n),
             "bf16_positions": lambda: bf16_positions(spec, n)}[build]()
    stacked = np.stack([cache["cos"].T, cache["sin"].T])  # [2, dim, n], one .npy as a framework saves it
    report = audit_bytes(_npy(stacked), config=cfg)
    assert causes(report) == expected, report["findings"]
    assert "[128, 4096]" in next(f["evidence"] for f in report["findings"] if f["cause"] == "transposed")
    assert report["cache"]["rows"] == n and report["cache"]["source"].endswith("transposed")


def test_random_values_are_not_called_transposed():
    from audit_recipes import random_angles

    cache = random_angles(64, 2048)  # [64, 4096]: wider than long, like a transposed cache, but no cache either way
    report = audit_arrays({k: v for k, v in cache.items()})
    assert causes(report) == ["no_known_cause"], report["findings"]


def test_more_frequencies_than_any_spec_is_a_posenc_error():
    """[16, 70000] values in a half layout are 35000 frequencies per row: no spec has that many (it was a
    ValueError out of the spec inference: a 500 over HTTP)."""
    from audit_recipes import random_angles

    with pytest.raises(PosencError) as info:
        audit_arrays(random_angles(16, 35000))
    assert info.value.field == "cache" and "35000 frequencies" in str(info.value)


def test_a_transposed_cache_wider_than_any_spec_is_read_transposed(monkeypatch):
    """Columns beyond 2 x max_dim are refused before anything is read; the transpose is then audited."""
    from posenc.limits import LIMITS

    monkeypatch.setattr(LIMITS, "max_dim", 1024)  # a [128, 4096] cache: 4096 columns > 2 x 1024
    cache = exact(LLAMA_SPEC, np.arange(4096))
    report = audit_arrays({"cos": cache["cos"].T, "sin": cache["sin"].T}, config("llama-3.1-8b",
                                                                            max_position_embeddings=4096))
    assert causes(report) == ["transposed"], report["findings"]
