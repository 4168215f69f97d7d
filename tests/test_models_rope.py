"""Every RoPE family against transformers 5.24's own classes (goldens: tests/golden/model_rope.npz).

For each fixture config (and a bare {"model_type": ...} per family, which checks the config
classes' defaults) and each layer type: posenc.from_hf_config -> rope_cos_sin / rope_apply vs
the family's RotaryEmbedding + apply_rotary_pos_emb at positions 0, 1, 4095, 100000.
The scores q_i . k_j of rotated fixed random vectors are what check the layout: a wrong
pairing (half vs interleaved, wrong rotary slice) moves them by O(1).

Tolerances (documented in the model table of docs/model-families.md):
* float64 (HF's code run with float64 dtypes): 1e-10 absolute on cos/sin, 1e-10 relative
  to the largest score -- both sides are float64; angles p * w at p = 1e5 round at ~1e-11.
* float32 (HF as it runs): HF forms angles in float32, so its error grows with the position:
  within 2e-6 for p <= 7, within p * max(w) * 2**-21 + 2e-6 beyond; posenc's own float32
  output stays within 2.4e-7 of the float64 golden at every position.
"""

import collections
from pathlib import Path

import numpy as np
import pytest

import posenc
from conftest import hf_config

GOLDEN = Path(__file__).parent / "golden" / "model_rope.npz"


def _load():
    data = np.load(GOLDEN)
    entries = collections.defaultdict(dict)
    layer_types = {}
    for key in data.files:
        parts = key.split("|")
        if parts[0] == "facts":
            continue  # reference behaviours: test_models_readers.py
        if len(parts) == 2:
            layer_types[parts[0]] = list(data[key])
        else:
            entries[tuple(parts[:3])][parts[3]] = data[key]
    return dict(entries), layer_types


ENTRIES, LAYER_TYPES = _load()


def config_of(fixture: str) -> dict:
    if fixture.startswith("defaults-"):
        return {"model_type": fixture.removeprefix("defaults-")}
    return hf_config(fixture)


def spec_of(fixture: str, layer_type: str):
    return posenc.from_hf_config(config_of(fixture))[layer_type].spec


def scores(entry, spec, *, layout=None, seq_len=None, dtype=np.float64):
    q, k, pos = entry["q"].astype(dtype), entry["k"].astype(dtype), entry["positions"]
    q_rot = posenc.rope_apply(q, pos, spec, layout=layout, seq_len=seq_len)
    k_rot = posenc.rope_apply(k, pos, spec, layout=layout, seq_len=seq_len)
    return q_rot.astype(np.float64) @ k_rot.astype(np.float64).T


#: transformers 5.24's Phi-3.5-MoE rotary recomputes inv_freq without seq_len in forward(), so it
#: never switches to long_factor (it does switch the mscale); posenc follows the model's design.
HF_NEVER_USES_LONG_FACTOR = {("phi-3.5-moe", "long")}
CASES = sorted(k for k in ENTRIES if (k[0], k[2]) not in HF_NEVER_USES_LONG_FACTOR)


@pytest.mark.parametrize("fixture,layer_type,probes", CASES, ids=["|".join(c) for c in CASES])
def test_float64_cos_sin_and_scores_match_transformers(fixture, layer_type, probes):
    entry = ENTRIES[fixture, layer_type, probes]
    spec = spec_of(fixture, layer_type)
    cos, sin = posenc.rope_cos_sin(entry["positions"], spec, dtype="float64")
    assert cos.shape == entry["cos64"].shape
    np.testing.assert_allclose(cos, entry["cos64"], rtol=0, atol=1e-10)
    np.testing.assert_allclose(sin, entry["sin64"], rtol=0, atol=1e-10)
    expected = entry["scores64"]
    np.testing.assert_allclose(scores(entry, spec), expected, rtol=0, atol=1e-10 * np.abs(expected).max())


@pytest.mark.parametrize("fixture,layer_type,probes", CASES, ids=["|".join(c) for c in CASES])
def test_the_scores_see_the_layout(fixture, layer_type, probes):
    """The other layout misses the golden scores by far more than the tolerance: the check is sharp."""
    entry = ENTRIES[fixture, layer_type, probes]
    spec = spec_of(fixture, layer_type)
    other = "half" if spec.layout == "interleaved" else "interleaved"
    expected = entry["scores64"]
    assert np.abs(scores(entry, spec, layout=other) - expected).max() > 1e-3 * np.abs(expected).max()


@pytest.mark.parametrize("fixture,layer_type,probes", CASES, ids=["|".join(c) for c in CASES])
def test_float32_hf_drifts_with_position_posenc_does_not(fixture, layer_type, probes):
    entry = ENTRIES[fixture, layer_type, probes]
    spec = spec_of(fixture, layer_type)
    pos = entry["positions"]
    exact = entry["cos64"]
    inv, attention = posenc.rope_inv_freq(spec, seq_len=float(pos.max()) + 1)
    hf_error = np.abs(entry["cos32"] - exact).max(axis=1)
    allowed = pos * inv.max() * 2.0**-21 * attention + 2e-6
    assert (hf_error <= allowed).all()
    assert (hf_error[pos <= 7] <= 2e-6).all()
    ours, _ = posenc.rope_cos_sin(pos, spec, dtype="float32")
    assert np.abs(ours - exact).max() <= 2.4e-7 * max(attention, 1.0)


def test_phimoe_reference_never_uses_long_factor():
    """HF 5.24 Phimoe: past original_max_position_embeddings it keeps short_factor (with long_mscale)."""
    entry = ENTRIES["phi-3.5-moe", "default", "long"]
    spec = spec_of("phi-3.5-moe", "default")
    pos = entry["positions"]
    ours, _ = posenc.rope_cos_sin(pos, spec, dtype="float64")  # seq_len = 100001 > 4096: long_factor
    assert np.abs(ours - entry["cos64"]).max() > 0.1
    short, _ = posenc.rope_cos_sin(pos, spec, dtype="float64", seq_len=4096)
    np.testing.assert_allclose(short, entry["cos64"], rtol=0, atol=1e-10)  # what HF computes
    assert spec.scaling["long_mscale"] == spec.scaling["short_mscale"]  # so only the factors differ


@pytest.mark.parametrize("fixture", sorted(LAYER_TYPES))
def test_layer_indices_match_the_model(fixture):
    """Which layer uses which encoding: from layer_types / sliding_window_pattern / every-n rules."""
    model = posenc.from_hf_config(config_of(fixture))
    ours = ["none"] * len(LAYER_TYPES[fixture])
    for name, entry in model.encodings.items():
        for i in entry.layers:
            ours[i] = name
    assert ours == LAYER_TYPES[fixture]


def test_every_rope_family_has_goldens():
    covered = {config_of(fixture)["model_type"] for fixture, _, _ in ENTRIES}
    families = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "phi3", "phimoe",
                "gemma", "gemma2", "gemma3", "gemma3_text", "cohere", "cohere2", "glm", "glm4", "chatglm",
                "deepseek_v2", "deepseek_v3", "gpt_neox", "gptj", "codegen", "stablelm", "stablelm_epoch",
                "olmo", "olmo2", "falcon", "modernbert"}
    assert families <= covered
