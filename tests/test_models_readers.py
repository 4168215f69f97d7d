"""The family readers' decisions, one by one: layer types, layouts, legacy keys, refusals.

The numbers themselves are checked against transformers in test_models_rope.py; these tests
pin what each reader decides from which key (and that bad or unknown keys are named)."""

import math
import warnings

import numpy as np
import pytest

import posenc
from posenc import PosencError
from posenc.encodings import AlibiSpec
from posenc.encodings.rope_scaling import yarn
from conftest import HERE, hf_config

GOLDEN = HERE / "golden" / "model_rope.npz"


def error_field(config, **kwargs) -> str:
    with pytest.raises(PosencError) as info:
        posenc.from_hf_config(config, **kwargs)
    return info.value.field


def test_gemma3_layer_types_bases_and_scaling():
    model = posenc.from_hf_config(hf_config("gemma-3-4b"))
    sliding, full = model["sliding_attention"], model["full_attention"]
    assert (sliding.spec.base, sliding.spec.rope_type) == (1e4, "default")
    assert (full.spec.base, full.spec.scaling) == (1e6, {"rope_type": "linear", "factor": 8.0})
    assert full.layers == (5, 11, 17, 23, 29) and len(sliding.layers) == 29
    assert model.to_dict()["layer_types"]["full_attention"]["kind"] == "rope"


def test_gemma3_nested_v5_rope_parameters_equal_the_legacy_keys():
    legacy = hf_config("gemma-3-4b")["text_config"]
    v5 = {k: v for k, v in legacy.items() if k not in ("rope_scaling", "rope_theta", "rope_local_base_freq")}
    v5["rope_parameters"] = {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
                             "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}
    ours, theirs = posenc.from_hf_config(legacy), posenc.from_hf_config(v5)
    assert ours.to_dict() == theirs.to_dict()
    flat = {**v5, "rope_parameters": {"rope_type": "default", "rope_theta": 1e6}}
    assert error_field(flat) == "config.rope_parameters.rope_type"  # Gemma-3 nests by layer type


def test_modernbert_global_local_aliases_and_period():
    model = posenc.from_hf_config(hf_config("modernbert-base"))
    assert model["global"] is model["full_attention"] and model["local"] is model["sliding_attention"]
    assert model["global"].spec.base == 160_000.0 and model["local"].spec.base == 10_000.0
    assert model["global"].layers == tuple(range(0, 22, 3))
    with pytest.raises(PosencError) as info:
        model.get()  # two layer types: the choice is named
    assert info.value.field == "layer_type" and "full_attention" in info.value.message


def test_cohere2_only_sliding_layers_rotate():
    model = posenc.from_hf_config(hf_config("command-r7b"))
    assert model.layer_types == ("sliding_attention",)
    entry = model["sliding_attention"]
    assert entry.apply == "interleaved" and 3 not in entry.layers and len(entry.layers) == 24
    assert "NoPE" in entry.notes[0] and "[3, 7," in entry.notes[0]


@pytest.mark.parametrize("name,layout", [("command-r", "interleaved"), ("glm-4-9b-chat-hf", "interleaved"),
                                         ("glm-4-9b-0414", "interleaved"), ("glm-4-9b-chat", "interleaved"),
                                         ("deepseek-v3", "interleaved"), ("deepseek-v2-lite", "interleaved"),
                                         ("gpt-j-6b", "interleaved"), ("codegen-350m-mono", "interleaved"),
                                         ("llama-3.1-8b", "half"), ("gpt-neox-20b", "half"), ("phi-4-mini", "half")])
def test_layouts(name, layout):
    assert posenc.RopeSpec.from_hf_config(hf_config(name)).layout == layout


def test_deepseek_v3_rope_interleave_false_is_rotate_half():
    config = {**hf_config("deepseek-v3"), "rope_interleave": False}
    assert posenc.RopeSpec.from_hf_config(config).layout == "half"
    assert error_field({**config, "rope_interleave": "yes"}) == "config.rope_interleave"


def test_deepseek_notes_the_softmax_mscale():
    entry = posenc.from_hf_config(hf_config("deepseek-v3")).get()
    assert entry.spec.head_dim == 64 and "mscale_all_dim" in entry.notes[0]


def test_chatglm_facts():
    spec = posenc.RopeSpec.from_hf_config(hf_config("glm-4-9b-chat"))
    assert (spec.head_dim, spec.rotary_dim, spec.base, spec.layout) == (128, 64, 5e6, "interleaved")
    assert posenc.RopeSpec.from_hf_config(hf_config("chatglm3-6b")).base == 1e4  # rope_ratio default 1
    null_kv = {**hf_config("chatglm3-6b"), "kv_channels": None, "hidden_size": 2048, "num_attention_heads": 16}
    assert posenc.RopeSpec.from_hf_config(null_kv).head_dim == 128
    assert error_field({**hf_config("chatglm3-6b"), "position_encoding_2d": True}) == "config.position_encoding_2d"


def test_stablelm_legacy_rope_pct_is_read():
    config = {**hf_config("stablelm-3b-4e1t"), "rope_pct": 0.5}
    assert posenc.RopeSpec.from_hf_config(config).rotary_dim == 40  # transformers 5.24 would say 20 (0.25)


def test_gpt_neox_reads_its_own_names_not_rope_theta():
    config = {**hf_config("gpt-neox-20b"), "rotary_emb_base": 50_000, "rope_theta": 7}
    assert posenc.RopeSpec.from_hf_config(config).base == 50_000


def test_gptj_rotary_dim_rules():
    spec = posenc.RopeSpec.from_hf_config({**hf_config("gpt-j-6b"), "rotary_dim": 24, "n_embd": 1280, "n_head": 16})
    assert (spec.head_dim, spec.rotary_dim) == (80, 24)  # 24/80 rounds, the reader makes int(80 * f) == 24
    one_head = {**hf_config("gpt-j-6b"), "rotary_dim": None, "n_embd": 64, "n_head": 1}
    assert posenc.RopeSpec.from_hf_config(one_head).rotary_dim == 64
    assert error_field({**hf_config("gpt-j-6b"), "rotary_dim": 63}) == "config.rotary_dim"


def test_phi3_legacy_su_and_top_level_original():
    config = hf_config("phi-3-mini-128k")
    su = {**config, "rope_scaling": {**config["rope_scaling"], "type": "su"}}
    assert posenc.RopeSpec.from_hf_config(su).rope_type == "longrope"
    # Phi-3's config class always has original_max_position_embeddings (4096): it beats the dict's
    no_top = {k: v for k, v in su.items() if k != "original_max_position_embeddings"}
    no_top["rope_scaling"] = {**su["rope_scaling"], "original_max_position_embeddings": 999}
    assert posenc.RopeSpec.from_hf_config(no_top).original_max_position_embeddings == 4096


def test_phimoe_mscales_switch_with_the_regime():
    config = hf_config("phi-3.5-moe")
    config["rope_scaling"] = {**config["rope_scaling"], "short_mscale": 1.1, "long_mscale": 1.3}
    spec = posenc.RopeSpec.from_hf_config(config)
    assert posenc.rope_inv_freq(spec, seq_len=4096)[1] == 1.1
    assert posenc.rope_inv_freq(spec, seq_len=4097)[1] == 1.3
    cos, _ = posenc.rope_cos_sin([0, 5000], spec, dtype="float64")  # seq_len 5001: long regime
    assert cos[0, 0] == pytest.approx(1.3)
    only_one = dict(config["rope_scaling"])
    del only_one["short_mscale"]
    assert error_field({**config, "rope_scaling": only_one}) == "config.rope_scaling.short_mscale"


def test_falcon_alibi_and_rope():
    model = posenc.from_hf_config(hf_config("falcon-rw-1b"))
    entry = model.get()
    assert entry.spec == AlibiSpec(32, variant="falcon") and entry.apply == "bias" and len(entry.layers) == 24
    assert model.of_kind("rope") == {}
    with pytest.raises(PosencError) as info:
        posenc.RopeSpec.from_hf_config(hf_config("falcon-rw-1b"))
    assert info.value.field == "config" and "alibi" in info.value.message
    assert posenc.RopeSpec.from_hf_config(hf_config("falcon-7b")).head_dim == 64


def test_rope_shortcut_names_the_choices():
    with pytest.raises(PosencError) as info:
        posenc.RopeSpec.from_hf_config(hf_config("gemma-3-1b"))
    assert info.value.field == "layer_type"
    assert "full_attention" in info.value.message and "sliding_attention" in info.value.message


def test_generic_reader_refuses_unknown_position_keys():
    config = {"hidden_size": 256, "num_attention_heads": 4, "rope_theta": 5e5, "num_hidden_layers": 2,
              "rope_twist": True}  # no model type: a RoPE described by its keys, read by the generic reader
    assert error_field(config) == "config.rope_twist"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = posenc.from_hf_config(config, strict=False)
    assert "config.rope_twist" in str(caught[0].message)
    assert model.reader == "__generic__" and model.get().spec.base == 5e5 and model.get().layers == (0, 1)
    del config["rope_twist"]
    for key in ("alibi", "position_embedding_type", "rotary_emb_base", "relative_attention_num_buckets"):
        assert error_field({**config, key: 1}) == f"config.{key}"


def test_generic_reader_needs_a_rope_key():
    assert error_field({"hidden_size": 256, "num_attention_heads": 4}) == "config.model_type"


def test_generic_reader_nested_v5_and_text_config():
    config = {"head_dim": 64, "num_hidden_layers": 3,
              "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
              "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1e6},
                                  "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}}
    model = posenc.from_hf_config(config)
    assert model["full_attention"].layers == (1,) and model["sliding_attention"].spec.base == 1e4
    wrapped = posenc.from_hf_config({"model_type": "llava", "text_config": hf_config("llama-3.1-8b")})
    assert wrapped.reader == "llama" and wrapped.get().spec == posenc.RopeSpec.from_hf_config(hf_config("llama-3.1-8b"))
    odd = {"model_type": "llava", "vision_rotary_dim": 32, "text_config": hf_config("llama-3.1-8b")}
    assert error_field(odd) == "config.vision_rotary_dim"  # the wrapper's own position keys are checked too


GOLDEN_FACTS = {key.split("|", 1)[1]: value for key, value in np.load(GOLDEN).items() if key.startswith("facts|")}


def test_reference_facts_the_readers_follow():
    """Behaviours recorded from transformers itself (model_reference.reference_facts)."""
    stablelm = posenc.RopeSpec.from_hf_config({"model_type": "stablelm", "rope_pct": 0.5})
    assert GOLDEN_FACTS["stablelm_rope_pct_0.5|partial_rotary_factor"] == 0.25  # HF ignores rope_pct
    assert stablelm.partial_rotary_factor == 0.5  # posenc reads it (docs/model-families.md says so)
    cohere2 = posenc.RopeSpec.from_hf_config({"model_type": "cohere2", "hidden_size": 4096,
                                              "num_attention_heads": 32, "head_dim": 64})
    assert cohere2.head_dim == GOLDEN_FACTS["cohere2_head_dim_64|head_dim"] == 64
    assert GOLDEN_FACTS["gpt-j-6b|table_rows"] == hf_config("gpt-j-6b")["n_positions"]
    spec = posenc.RopeSpec.from_hf_config(hf_config("deepseek-v3"))
    mscale = yarn.get_mscale(spec.scaling["factor"], spec.scaling["mscale_all_dim"])
    assert GOLDEN_FACTS["deepseek-v3|softmax_scale_over_plain"] == pytest.approx(mscale**2, rel=1e-12)


def test_family_defaults_from_a_bare_config():
    """A config that only names its model type gets the config class's defaults (checked vs HF in goldens)."""
    assert posenc.RopeSpec.from_hf_config({"model_type": "mixtral"}).base == 1e6
    assert posenc.RopeSpec.from_hf_config({"model_type": "cohere"}).base == 5e5
    assert posenc.RopeSpec.from_hf_config({"model_type": "qwen3"}).head_dim == 128
    glm = posenc.RopeSpec.from_hf_config({"model_type": "glm"})
    assert (glm.head_dim, glm.rotary_dim) == (128, 64)
    assert posenc.RopeSpec.from_hf_config({"model_type": "gpt_neox"}).partial_rotary_factor == 0.25


def test_errors_name_the_config_key():
    llama = hf_config("llama-3.1-8b")
    assert error_field({**llama, "rope_scaling": {**llama["rope_scaling"], "factor": "x"}}) == "config.rope_scaling.factor"
    assert error_field({**llama, "rope_theta": [1]}) == "config.rope_theta"
    assert error_field({**llama, "num_attention_heads": 5}) == "config.num_attention_heads"
    assert error_field({**llama, "rope_scaling": {**llama["rope_scaling"], "rope_type": ["x"]}}) == \
        "config.rope_scaling.rope_type"
    gemma = hf_config("gemma-3-1b")
    bad = {**gemma, "rope_parameters": {**gemma["rope_parameters"], "full_attention": {"rope_type": "linear"}}}
    assert error_field(bad) == "config.rope_parameters.full_attention.factor"
    assert error_field({"model_type": "gemma3", "text_config": {"rope_theta": "x"}}) == "config.text_config.rope_theta"


def test_null_head_dim_follows_the_config_class():
    """transformers' Qwen3/Gemma/GLM-4 config classes default head_dim to a number and reject null;
    Llama/Mistral/Mixtral read null as hidden // heads."""
    assert error_field({**hf_config("qwen3-8b"), "head_dim": None}) == "config.head_dim"
    assert posenc.RopeSpec.from_hf_config({**hf_config("mistral-7b"), "head_dim": None}).head_dim == 128


def test_num_layers_is_bounded():
    assert error_field({**hf_config("llama-3.1-8b"), "num_hidden_layers": 10**9}) == "config.num_hidden_layers"


def test_rope_apply_from_a_config_is_usable():
    spec = posenc.from_hf_config(hf_config("glm-4-9b-chat-hf")).get().spec
    x = np.ones((3, spec.head_dim))
    out = posenc.rope_apply(x, [0, 1, 2], spec)
    np.testing.assert_array_equal(out[:, spec.rotary_dim:], 1.0)  # the pass-through half is untouched
    assert math.isclose(np.linalg.norm(out[2]), np.linalg.norm(x[2]))
