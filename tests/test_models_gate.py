"""The real configs that leaked past from_hf_config's gate, each read exactly or answered with what
it took and why (issue 35's models): Kimi-K2 (an unknown model type naming DeepSeek-V3's class),
Qwen3-Next without layer_types, Gemma-3n's legacy keys, DBRX's base, Hunyuan's NTK-alpha dict and
MiniMax-Text-01's rotary_dim. The fixtures are trimmed from their real config.json files; the
oracles are transformers' own config classes and rotary modules where the test env has them.
"""

import config_forms
import numpy as np
import posenc
import pytest
from conftest import hf_config
from posenc.models import checked

VERSION = checked.record()["transformers"]


def error(config) -> posenc.PosencError:
    with pytest.raises(posenc.PosencError) as caught:
        posenc.from_hf_config(config)
    return caught.value


# --- an unknown model type: read by its architecture, or refused naming both --------------------

def test_kimi_k2_is_read_as_deepseek_v3_through_its_architecture():
    kimi = hf_config("kimi-k2-instruct")
    model = posenc.from_hf_config(kimi)
    assert (model.model_type, model.reader) == ("kimi_k2", "deepseek_v3")
    entry = model.get()
    assert entry.apply == "interleaved" and entry.spec.layout == "interleaved"  # not the generic reader's half
    assert entry.spec == posenc.from_hf_config({**kimi, "model_type": "deepseek_v3"}).get().spec
    assert entry.layers == tuple(range(61)) and entry.spec.scaling["factor"] == 32.0 and entry.spec.base == 5e4
    assert model.notes[0] == (f"model type 'kimi_k2' is not one transformers {VERSION} knows: read as 'deepseek_v3', "
                              "the model type whose modeling code defines its architecture DeepseekV3ForCausalLM")
    assert model.to_dict()["notes"] == list(model.notes)


def test_the_half_layout_kimi_k2_got_before_moves_its_scores():
    """What the generic reading cost: the same cos/sin paired as rotate_half scores q.k differently."""
    spec = posenc.from_hf_config(hf_config("kimi-k2-instruct")).get().spec
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((2, 1, 64))
    def score(layout):
        return float(posenc.rope_apply(q, [1000], spec, layout=layout)[0] @ posenc.rope_apply(k, [0], spec, layout=layout)[0])
    assert abs(score("half") - score("interleaved")) > 0.1 * abs(score("interleaved"))


def test_a_nested_unknown_model_type_is_read_by_its_architecture_too():
    model = posenc.from_hf_config({"model_type": "llava", "text_config": hf_config("kimi-k2-instruct")})
    assert model.reader == "deepseek_v3" and model.get().apply == "interleaved" and "kimi_k2" in model.notes[0]


def test_a_language_config_naming_no_model_type_is_of_the_type_its_wrapper_builds():
    """transformers builds Llava's text_config without a model_type as a LlamaConfig: posenc reads it so."""
    text = {"hidden_size": 2048, "num_attention_heads": 16, "rope_theta": 5e5}
    model = posenc.from_hf_config({"model_type": "llava", "text_config": text})
    assert model.reader == "llama" and model.get().layers == tuple(range(32))  # LlamaConfig's 32 layers
    pytest.importorskip("transformers")
    made = config_forms.config_object({"model_type": "llava", "text_config": text})
    assert made.text_config.model_type == "llama"
    assert config_forms.answer({"model_type": "llava", "text_config": text}) == config_forms.answer(made)


def test_an_unknown_model_type_and_architecture_are_refused_naming_both():
    """MiniMax-Text-01's own config.json (remote code: model_type minimax_text_01): nothing says which
    family reads it, so it is refused, not read as a Llama."""
    remote = {**hf_config("minimax-text-01-hf"), "model_type": "minimax_text_01",
              "architectures": ["MiniMaxText01ForCausalLM"]}
    exc = error(remote)
    assert exc.field == "config.model_type"
    assert f"model type 'minimax_text_01' is not one transformers {VERSION} knows" in exc.message
    assert "'MiniMaxText01ForCausalLM'" in exc.message


def test_an_architecture_of_an_unchecked_model_type_meets_the_gate():
    exc = error({"model_type": "my_pixtral", "architectures": ["PixtralVisionModel"], "hidden_size": 64,
                 "num_attention_heads": 4, "rope_theta": 1e4})
    assert exc.field == "config.model_type" and "has not checked model type 'pixtral'" in exc.message


# --- Qwen3-Next: layer_types as its config class derives them ---------------------------------

def test_qwen3_next_real_config_without_layer_types():
    raw = hf_config("qwen3-next-80b-a3b")
    assert "layer_types" not in raw
    model = posenc.from_hf_config(raw)
    entry = model.get()
    assert entry.layers == tuple(range(3, 48, 4)) and len(model.without) == 36
    assert (entry.spec.head_dim, entry.spec.rotary_dim, entry.spec.base) == (256, 64, 1e7)
    written = [("full_attention" if i in entry.layers else "linear_attention") for i in range(48)]
    assert config_forms.answer({**raw, "layer_types": written}) == config_forms.answer(raw)


def test_qwen3_next_interval_and_defaults_follow_the_class():
    transformers = pytest.importorskip("transformers")
    for given in ({"full_attention_interval": 3, "num_hidden_layers": 9}, {"num_hidden_layers": 6}):
        raw = {"model_type": "qwen3_next", **given}
        made = transformers.Qwen3NextConfig(**given)
        full = tuple(i for i, t in enumerate(made.layer_types) if t == "full_attention")
        entry = posenc.from_hf_config(raw).get()
        assert entry.layers == full and entry.spec.head_dim == made.head_dim == 256
        assert entry.spec.partial_rotary_factor == made.rope_parameters["partial_rotary_factor"] == 0.25
        assert config_forms.answer(raw) == config_forms.answer(made)


# --- Gemma-3n: its legacy keys read, as its to_dict() form is -----------------------------------

def test_gemma3n_config_json_is_read_as_its_to_dict_form():
    raw = hf_config("gemma-3n-e4b")
    model = posenc.from_hf_config(raw)
    assert model.reader == "gemma3n_text"
    assert model["full_attention"].layers == tuple(range(4, 35, 5)) and model["full_attention"].spec.base == 1e6
    assert model["sliding_attention"].spec.base == 1e4 and len(model["sliding_attention"].layers) == 28
    pytest.importorskip("transformers")
    made = config_forms.config_object(raw)
    assert config_forms.answer(raw) == config_forms.answer(config_forms.plain(made.to_dict()))
    bare = posenc.from_hf_config({"model_type": "gemma3n_text", "num_hidden_layers": 10})
    assert bare["full_attention"].layers == (4, 9)  # no layer_types: every 5th, a period no key changes


# --- DBRX: the file's base, in every form, saying what transformers uses -----------------------

def test_dbrx_base_is_attn_configs_in_every_form_and_the_answer_says_transformers_uses_10000():
    raw = hf_config("dbrx-instruct")
    model = posenc.from_hf_config(raw)
    assert model.get().spec.base == 500000.0 and model.get().spec.head_dim == 128
    note = model.notes[0]
    assert note.startswith("base 500000 is attn_config.rope_theta") and "computes cos/sin with base 10000" in note
    transformers = pytest.importorskip("transformers")
    made = transformers.DbrxConfig(**{k: v for k, v in raw.items() if k not in config_forms.NOT_KEYWORDS})
    assert made.rope_parameters["rope_theta"] == 10000.0  # what transformers' rotary embedding reads
    assert made.attn_config.rope_theta == 500000  # the checkpoint's, which DBRX's own code reads
    for form in (made, made.to_dict()):
        read = posenc.from_hf_config(form)
        assert read.get().spec == model.get().spec and "whose rope_theta is 10000" in read.notes[0]


# --- Hunyuan: the NTK-alpha dict its config.json writes ---------------------------------------

@pytest.mark.parametrize("name", ["hunyuan-7b-instruct", "hunyuan-a13b-instruct"])
def test_hunyuan_alpha_dict_is_read_saying_what_its_rotary_ignores(name):
    raw = hf_config(name)
    entry = posenc.from_hf_config(raw).get()
    assert entry.spec.scaling == {"rope_type": "ntk", "factor": 1000.0} and entry.spec.head_dim == 128
    assert "beta_fast" in entry.notes[0] and "mscale_all_dim" in entry.notes[0] and "alpha^(d/(d-2))" in entry.notes[0]
    huge = error({**raw, "rope_scaling": {**raw["rope_scaling"], "alpha": 1e308}})
    assert huge.field == "config.rope_scaling.alpha" and "past the largest float" in huge.message
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    made = config_forms.config_object(raw)
    module = {"hunyuan_v1_dense": "hunyuan_v1_dense.modeling_hunyuan_v1_dense.HunYuanDenseV1RotaryEmbedding",
              "hunyuan_v1_moe": "hunyuan_v1_moe.modeling_hunyuan_v1_moe.HunYuanMoEV1RotaryEmbedding"}[raw["model_type"]]
    path, cls = module.rsplit(".", 1)
    rotary = getattr(__import__(f"transformers.models.{path}", fromlist=[cls]), cls)(made)
    assert rotary.rope_type == "ntk_alpha" and transformers.__version__ == VERSION
    want = rotary.inv_freq.double().numpy()  # float32 in transformers: 2**-23 relative
    ours, _ = posenc.rope_inv_freq(entry.spec)
    assert np.allclose(ours, want, rtol=2.0**-22, atol=0)


# --- MiniMax-Text-01: rotary_dim, which transformers does not read ------------------------------

def test_minimax_rotary_dim_is_rotated_and_the_answer_says_transformers_rotates_all():
    raw = hf_config("minimax-text-01-hf")
    model = posenc.from_hf_config(raw)
    entry = model.get()
    assert (entry.spec.head_dim, entry.spec.rotary_dim) == (128, 64) and entry.layers == tuple(range(7, 80, 8))
    note = (f"rotary_dim 64: posenc rotates the first 64 of the 128 head dims, as the model's own modeling code "
            f"does; transformers {VERSION}'s MiniMaxConfig does not read rotary_dim, so its model rotates all 128")
    assert model.notes == (note,)
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers.models.minimax.modeling_minimax import MiniMaxRotaryEmbedding

    made = config_forms.config_object(raw)
    assert MiniMaxRotaryEmbedding(made).inv_freq.shape[0] == 64  # 128 dims rotate in transformers: 64 frequencies
    assert posenc.from_hf_config(made).notes == model.notes and posenc.from_hf_config(made).get().spec == entry.spec


# --- Llama-4: NoPE layers with a position-dependent query temperature ---------------------------

def test_llama4_nope_layers_name_their_position_dependent_temperature_in_every_config_form():
    """Llama-4's NoPE layers rotate nothing but, with attn_temperature_tuning (its class's default),
    scale each query by log1p(floor((p + 1) / floor_scale)) * attn_scale + 1: "no positions" alone
    would hide it. The note holds for the raw file (the class's defaults filled in), its to_dict()
    and the config object; a config that turns tuning off gets none."""
    transformers = pytest.importorskip("transformers")
    raw = {"model_type": "llama4_text", "hidden_size": 5120, "num_attention_heads": 40, "head_dim": 128,
           "num_hidden_layers": 8, "rope_theta": 500000.0, "no_rope_layers": [1, 1, 1, 0, 1, 1, 1, 0]}
    config = transformers.Llama4TextConfig(**raw)
    forms = [posenc.from_hf_config(form) for form in (raw, config.to_dict(), config)]
    for model in forms:
        assert model.without == (3, 7)
        assert model.notes == ("layers [3, 7] apply no rotation but scale each query at position p by "
                               "log1p(floor((p + 1) / 8192)) * 0.1 + 1 (attn_temperature_tuning, floor_scale, "
                               "attn_scale): a position-dependent temperature of the attention, not an encoding "
                               "posenc computes",)
    from transformers.models.llama4.modeling_llama4 import Llama4TextAttention

    layer = Llama4TextAttention(config, 3)
    assert layer.attn_temperature_tuning and not layer.use_rope  # transformers' own layer 3 does this
    assert posenc.from_hf_config({**raw, "attn_temperature_tuning": False}).notes == ()
