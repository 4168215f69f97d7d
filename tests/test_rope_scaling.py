"""RoPE inverse frequencies: docs/formulas.md goldens, HF transformers 5.24 values, real configs."""

import math

import numpy as np
import pytest

import posenc
from posenc.encodings.rope_scaling import llama3, yarn
from conftest import hf_config
from crmath_oracle import cr_pow

CONFIGS = ["llama-3.1-8b", "qwen2-7b-yarn", "mistral-7b", "phi-3-mini-128k", "deepseek-v3", "gpt-neox-20b",
           "gpt-j-6b"]


def default_inv(base, d):
    """1/base^(2i/d) with pow correctly rounded (mpmath rounded once), as the specs compute it."""
    return 1.0 / np.array([cr_pow(base, i / d) for i in range(0, d, 2)])


def test_yarn_correction_range_golden():
    """docs/formulas.md: D=128, b=1e4, L_orig=2048 gives low=16, high=41."""
    spec = posenc.RopeSpec(128, scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048})
    assert yarn.correction_range(spec.dims, spec.scaling_params) == (16, 41)
    inv, attention = posenc.rope_inv_freq(spec)
    base = default_inv(1e4, 128)
    np.testing.assert_array_equal(inv[:16], base[:16])  # high frequencies untouched
    np.testing.assert_allclose(inv[41:], base[41:] / 4.0, rtol=1e-15)  # low frequencies interpolated
    assert attention == pytest.approx(0.1 * math.log(4.0) + 1.0)


def test_yarn_mscale_rules():
    dims = dict(original_max_position_embeddings=4096)
    both = posenc.RopeSpec(64, scaling={"rope_type": "yarn", "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0}, **dims)
    assert posenc.rope_inv_freq(both)[1] == 1.0  # DeepSeek-V3: equal mscales cancel
    alone = posenc.RopeSpec(64, scaling={"rope_type": "yarn", "factor": 40, "mscale": 0.707}, **dims)
    assert posenc.rope_inv_freq(alone)[1] == pytest.approx(0.1 * math.log(40) + 1)  # mscale alone is ignored
    fixed = posenc.RopeSpec(64, scaling={"rope_type": "yarn", "factor": 40, "attention_factor": 0.5}, **dims)
    assert posenc.rope_inv_freq(fixed)[1] == 0.5
    zero_betas = posenc.RopeSpec(64, scaling={"rope_type": "yarn", "factor": 4, "beta_fast": 0, "beta_slow": 0}, **dims)
    assert zero_betas.scaling["beta_fast"] == 32.0 and zero_betas.scaling["beta_slow"] == 1.0  # HF's `or`


def test_llama31_bands_golden():
    """docs/formulas.md: Llama-3.1 (D=128, b=5e5, f=8, 1/4, 8192): 29 kept, 6 smoothed, 29 divided."""
    spec = posenc.RopeSpec.from_hf_config(hf_config("llama-3.1-8b"))
    bands = llama3.bands(spec.dims, spec.scaling_params)
    assert [int((bands == k).sum()) for k in (0, 1, 2)] == [29, 6, 29]
    inv, _ = posenc.rope_inv_freq(spec)
    base = default_inv(5e5, 128)
    np.testing.assert_array_equal(inv[bands == 0], base[bands == 0])
    np.testing.assert_allclose(inv[bands == 2], base[bands == 2] / 8, rtol=1e-15)
    middle = inv[bands == 1]
    assert ((middle < base[bands == 1]) & (middle > base[bands == 1] / 8)).all()


@pytest.mark.parametrize("name", CONFIGS)
def test_hf_configs_match_transformers(name, goldens):
    """inv_freq and attention scaling agree with transformers' own RotaryEmbedding (float32 there)."""
    spec = posenc.RopeSpec.from_hf_config(hf_config(name))
    inv, attention = posenc.rope_inv_freq(spec)
    entry = goldens["rope"][name]
    if name == "gpt-j-6b":
        assert spec.layout == "interleaved" and spec.rotary_dim == 64
        row = np.array(entry["gptj_sincos_row7"])  # create_sinusoidal_positions: [sin | cos]
        np.testing.assert_allclose(np.concatenate([np.sin(7 * inv), np.cos(7 * inv)]), row, atol=3e-7)
        return
    hf = np.array(entry["inv_freq_float32"])
    assert inv.shape == hf.shape
    np.testing.assert_allclose(inv, hf, rtol=4e-7)  # float32 rounding of HF's values
    assert attention == pytest.approx(entry["attention_scaling"], rel=1e-7)
    # small positions: HF's float32 angles are still accurate, so the caches agree
    pos = np.array(entry["probe_positions"][:2])  # 0 and 1
    cos, sin = posenc.rope_cos_sin(pos, spec, seq_len=max(entry["probe_positions"]) + 1)
    np.testing.assert_allclose(cos, np.array(entry["cos_float32"])[:2], atol=3e-7 * attention)
    np.testing.assert_allclose(sin, np.array(entry["sin_float32"])[:2], atol=3e-7 * attention)


def test_hf_float32_angles_drift_but_ours_do_not(goldens):
    """At position 1e6 HF's float32 cache is off by ~1e-2 (float32 inv_freq times p); ours stays exact."""
    spec = posenc.RopeSpec.from_hf_config(hf_config("llama-3.1-8b"))
    entry = goldens["rope"]["llama-3.1-8b"]
    p = entry["probe_positions"][-1]
    inv, _ = posenc.rope_inv_freq(spec)
    exact = np.cos(p * inv)
    hf_error = np.abs(np.array(entry["cos_float32"][-1]) - exact).max()
    ours_error = np.abs(posenc.rope_cos_sin([p], spec)[0][0] - exact).max()
    assert hf_error > 1e-2
    assert ours_error < 1.2e-7


def test_config_details():
    neox = posenc.RopeSpec.from_hf_config(hf_config("gpt-neox-20b"))
    assert (neox.head_dim, neox.rotary_dim, neox.n_freq) == (96, 24, 12)
    ds = posenc.RopeSpec.from_hf_config(hf_config("deepseek-v3"))
    assert ds.head_dim == 64 and ds.rope_type == "yarn" and ds.original_max_position_embeddings == 4096
    phi = posenc.RopeSpec.from_hf_config(hf_config("phi-3-mini-128k"))
    assert phi.rope_type == "longrope" and phi.scaling["factor"] == 32.0
    # a top-level original_max_position_embeddings overrides the one in the scaling dict
    cfg = dict(hf_config("phi-3-mini-128k"))
    cfg["rope_scaling"] = {**cfg["rope_scaling"], "original_max_position_embeddings": 999}
    assert posenc.RopeSpec.from_hf_config(cfg).original_max_position_embeddings == 4096
    v5 = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 2,
          "rope_parameters": {"rope_type": "default", "rope_theta": 123.0}}
    assert posenc.RopeSpec.from_hf_config(v5).base == 123.0


def test_longrope_switches_on_seq_len():
    spec = posenc.RopeSpec.from_hf_config(hf_config("phi-3-mini-128k"))
    short = np.array(spec.scaling["short_factor"])
    long = np.array(spec.scaling["long_factor"])
    base = default_inv(1e4, 96)
    np.testing.assert_allclose(posenc.rope_inv_freq(spec)[0], base / short, rtol=1e-15)
    np.testing.assert_allclose(posenc.rope_inv_freq(spec, seq_len=4096)[0], base / short, rtol=1e-15)
    np.testing.assert_allclose(posenc.rope_inv_freq(spec, seq_len=4097)[0], base / long, rtol=1e-15)
    # cos/sin: a single position past the original length switches every row (like HF's module)
    cos_short, _ = posenc.rope_cos_sin([0, 10], spec)
    cos_long, _ = posenc.rope_cos_sin([0, 10, 5000], spec)
    assert not np.allclose(cos_short[1], cos_long[1])
    assert posenc.rope_inv_freq(spec)[1] == pytest.approx(math.sqrt(1 + math.log(32) / math.log(4096)))


@pytest.mark.parametrize("factor", [1.0, 2.0, 8.0])
def test_linear_is_default_over_factor(factor):
    default = posenc.rope_inv_freq(posenc.RopeSpec(64))[0]
    linear = posenc.rope_inv_freq(posenc.RopeSpec(64, scaling={"rope_type": "linear", "factor": factor}))[0]
    np.testing.assert_allclose(linear, default / factor, rtol=1e-15)


@pytest.mark.parametrize("seq_len", [None, 1, 100, 2047, 2048])
def test_dynamic_is_default_up_to_max(seq_len):
    spec = posenc.RopeSpec(64, scaling={"rope_type": "dynamic", "factor": 4.0}, max_position_embeddings=2048)
    np.testing.assert_array_equal(posenc.rope_inv_freq(spec, seq_len=seq_len)[0],
                                  posenc.rope_inv_freq(posenc.RopeSpec(64))[0])


def test_dynamic_and_static_ntk_grow_the_base():
    spec = posenc.RopeSpec(64, scaling={"rope_type": "dynamic", "factor": 4.0}, max_position_embeddings=2048)
    d = 64
    grown = 1e4 * ((4.0 * 8192 / 2048) - 3.0) ** (d / (d - 2))
    np.testing.assert_allclose(posenc.rope_inv_freq(spec, seq_len=8192)[0], default_inv(grown, d), rtol=1e-14)
    ntk = posenc.RopeSpec(64, scaling={"rope_type": "ntk", "factor": 4.0})
    np.testing.assert_allclose(posenc.rope_inv_freq(ntk)[0], default_inv(1e4 * 4.0 ** (d / (d - 2)), d), rtol=1e-14)


def test_proportional_and_partial():
    prop = posenc.RopeSpec(256, partial_rotary_factor=0.25,
                           scaling={"rope_type": "proportional", "factor": 2.0})
    inv, _ = posenc.rope_inv_freq(prop)
    assert inv.shape == (128,)
    k = int(0.25 * 256 // 2)
    np.testing.assert_allclose(inv[:k], 1.0 / 1e4 ** (2 * np.arange(k) / 256) / 2.0, rtol=1e-15)
    assert (inv[k:] == 0).all()
    odd_partial = posenc.RopeSpec(10, partial_rotary_factor=0.5)  # d = 5: ceil(5/2) = 3 frequencies
    assert odd_partial.n_freq == 3 and posenc.rope_inv_freq(odd_partial)[0].shape == (3,)


def test_spec_canonical_form_and_legacy_type_key():
    a = posenc.RopeSpec(128, scaling={"type": "linear", "factor": 2})
    b = posenc.RopeSpec(128, base=10000, scaling={"rope_type": "linear", "factor": 2.0})
    assert a == b and a.hash == b.hash and hash(a) == hash(b)
    assert posenc.RopeSpec.from_dict(a.to_dict()) == a
    assert posenc.RopeSpec(128, scaling={"type": "su", "long_factor": [1.0] * 64, "short_factor": [1.0] * 64},
                           max_position_embeddings=8192, original_max_position_embeddings=4096).rope_type == "longrope"
