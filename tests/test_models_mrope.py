"""Qwen2-VL / Qwen2.5-VL M-RoPE from real configs (top-level keys and transformers-5
`text_config` nesting) against Qwen2VLRotaryEmbedding / Qwen2_5_VLRotaryEmbedding and
`apply_rotary_pos_emb` in transformers 5.24: frequencies, cos/sin for [3, n] positions and the
q.k scores after rotation (which is how the section-to-axis layout is checked)."""

import json
from pathlib import Path

import numpy as np
import posenc
import pytest
from model_goldens import array, float32_angle_tolerance, meta, model

FIXTURES = ["qwen2-vl-7b-instruct", "qwen2.5-vl-3b-v5"]


@pytest.mark.parametrize("name", FIXTURES)
def test_config(name):
    entry = model(name).get()
    expected = meta(name)
    spec = entry.spec
    assert spec.mrope_section == tuple(expected["mrope_section"]) and spec.head_dim == expected["head_dim"]
    assert spec.base == expected["rope_theta"] and spec.rope_type == expected["rope_type"] == "default"
    assert entry.layers == tuple(range(expected["layers"])) and entry.apply == "half"
    inv, attention = posenc.rope_inv_freq(spec)
    assert attention == expected["attention_scaling"]
    np.testing.assert_allclose(inv, array(f"{name}/inv_freq_float32"), rtol=2.0**-23, atol=0)


def max_angle(spec, positions):
    """Per token, the largest angle any frequency reaches on any axis."""
    inv, _ = posenc.rope_inv_freq(spec)
    return np.abs(positions).max(axis=0) * inv.max()


@pytest.mark.parametrize("name", FIXTURES)
def test_cos_sin(name):
    spec = model(name).get().spec
    positions = array("mrope/positions")
    cos, sin = posenc.rope_cos_sin(positions, spec, dtype="float64")
    tolerance = float32_angle_tolerance(max_angle(spec, positions))[:, None]
    for ours, theirs in ((cos, array(f"{name}/cos")), (sin, array(f"{name}/sin"))):
        full = np.concatenate([ours, ours], axis=-1)  # HF repeats the n_freq columns ("half" layout)
        assert (np.abs(full - theirs) <= tolerance).all()


@pytest.mark.parametrize("name", FIXTURES)
def test_scores_after_rotation(name):
    """q.k^T after apply_rotary_pos_emb: each error bounded by |q||k| times both tokens' angle errors."""
    spec = model(name).get().spec
    positions = array("mrope/positions")
    q, k = array(f"{name}/q"), array(f"{name}/k")
    scores = posenc.rope_apply(q, positions, spec) @ posenc.rope_apply(k, positions, spec).T
    eps = float32_angle_tolerance(max_angle(spec, positions))
    norms_q, norms_k = np.linalg.norm(q, axis=1), np.linalg.norm(k, axis=1)
    tolerance = 2 * norms_q[:, None] * norms_k[None, :] * (eps[:, None] + eps[None, :])
    theirs = array(f"{name}/scores")
    assert (np.abs(scores - theirs) <= tolerance).all()
    # the bound is tight enough to see a wrong axis assignment: swapping height and width breaks it
    swapped = positions[[0, 2, 1]]
    wrong = posenc.rope_apply(q, swapped, spec) @ posenc.rope_apply(k, swapped, spec).T
    assert (np.abs(wrong - theirs) > tolerance).any()


def test_qwen3_vl_interleaves_its_mrope_frequencies():
    """Qwen3-VL interleaves its M-RoPE frequencies (apply_interleaved_mrope) whatever its config's
    `mrope_interleaved` says: checked at image-like [3, n] positions against its own rotary class."""
    with np.load(Path(__file__).parent / "golden" / "model_mrope_interleaved.npz") as golden:
        config, positions = json.loads(str(golden["config"])), golden["positions"]
        want_cos, want_sin = golden["cos"], golden["sin"]
    spec = posenc.from_hf_config({"model_type": "qwen3_vl", "text_config": config}).get().spec
    assert spec.mrope_interleaved and spec.mrope_section == (24, 20, 20)
    cos, sin = posenc.rope_cos_sin(positions, spec, dtype="float64")
    tolerance = np.abs(positions).max(axis=0)[:, None] * 2.0**-21 + 2.0**-22
    assert (np.abs(cos - want_cos) <= tolerance).all() and (np.abs(sin - want_sin) <= tolerance).all()
    chunked = posenc.RopeSpec(128, base=spec.base, mrope_section=[24, 20, 20])
    assert np.abs(posenc.rope_cos_sin(positions, chunked, dtype="float64")[0] - want_cos).max() > 0.1


def test_other_models_with_an_mrope_section_are_refused():
    """A model type whose modeling code posenc has no M-RoPE fact for: its section is refused."""
    text = {"model_type": "starcoder2", "hidden_size": 4096, "num_attention_heads": 32, "head_dim": 128,
            "rope_scaling": {"rope_type": "default", "mrope_section": [24, 20, 20]}}
    with pytest.raises(posenc.PosencError) as info:
        posenc.from_hf_config({"model_type": "llava", "text_config": text})
    assert info.value.field.endswith("mrope_section")


def test_defaults_and_nesting():
    """No mrope_section: the rotary class's [16, 24, 24]; text_config wins over top-level keys."""
    top = posenc.from_hf_config({"model_type": "qwen2_vl", "hidden_size": 3584, "num_attention_heads": 28}).get()
    assert top.spec.mrope_section == (16, 24, 24) and top.spec.base == 1e6
    assert any("default" in note for note in top.notes)
    nested = posenc.from_hf_config({"model_type": "qwen2_5_vl", "hidden_size": 64, "num_attention_heads": 1,
                                    "text_config": {"hidden_size": 1024, "num_attention_heads": 16,
                                                    "rope_parameters": {"rope_type": "default", "rope_theta": 5e5,
                                                                        "mrope_section": [8, 12, 12]}}}).get()
    assert nested.spec.head_dim == 64 and nested.spec.base == 5e5 and nested.spec.mrope_section == (8, 12, 12)
    assert nested.layers == tuple(range(80))  # Qwen2_5_VLTextConfig's default num_hidden_layers


@pytest.mark.parametrize("config, field", [
    ({"rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 8]}}, "config.rope_scaling.mrope_section"),
    ({"rope_scaling": {"type": "mrope", "mrope_section": "16,24,24"}}, "config.rope_scaling.mrope_section"),
    ({"hidden_size": 1024, "num_attention_heads": 16}, "config.rope_parameters.mrope_section"),  # default != 32
    ({"rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24], "mrope_interleaved": True}},
     "config.rope_scaling.mrope_interleaved"),
    ({"text_config": "x"}, "config.text_config"),
    ({"text_config": {"num_attention_heads": "x"}}, "config.text_config.num_attention_heads"),
    ({"hidden_size": 3584, "num_attention_heads": 27}, "config.num_attention_heads"),
])
def test_bad_configs_name_the_field(config, field):
    with pytest.raises(posenc.PosencError) as info:
        posenc.from_hf_config({"model_type": "qwen2_vl", "hidden_size": 3584, "num_attention_heads": 28, **config})
    assert info.value.field == field


def test_a_text_config_alone_reads_the_same():
    """`qwen2_5_vl_text` (the language model's own config) gives the wrapper's encoding."""
    from conftest import hf_config

    wrapper = hf_config("qwen2.5-vl-3b-v5")
    alone = posenc.from_hf_config(wrapper["text_config"]).get()
    assert alone.spec == model("qwen2.5-vl-3b-v5").get().spec and alone.layers == tuple(range(36))
