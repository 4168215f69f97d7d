"""from_hf_config answers a transformers model type only where a golden has checked it.

service/posenc/models/checked.json (tests/golden/generate_models.py, from the goldens) lists every
model type of the transformers release the goldens come from; the generic reader would answer
many that no golden checked (a vision tower's 2-D rotary read as 1-D, a hybrid's layers read as a
Llama's), so those are refused, naming why. tests/golden/model_unchecked_configs.json.gz holds
their default configs (`to_dict()`), so this runs without torch or transformers.
"""

import gzip
import json
from pathlib import Path

import model_truth
import posenc
import pytest
from posenc.models import READERS, checked

RECORD = json.loads(model_truth.CHECKED.read_text())
TYPES = RECORD["model_types"]
UNCHECKED = json.loads(gzip.decompress((Path(__file__).parent / "golden" / "model_unchecked_configs.json.gz")
                                       .read_bytes()))
FACT_KEYS = ("positions", "inputs", "nests", "config_error", "config")


@pytest.mark.parametrize("model_type", sorted(UNCHECKED))
def test_unchecked_model_type_is_refused_saying_why(model_type):
    with pytest.raises(posenc.PosencError) as caught:
        posenc.from_hf_config(UNCHECKED[model_type])
    assert caught.value.field == "config.model_type"
    assert f"has not checked model type {model_type!r} against transformers {RECORD['transformers']}" in \
        caught.value.message
    assert checked.why(TYPES[model_type]) in caught.value.message


def test_default_configs_here_are_those_of_the_gated_model_types():
    """Each stored config is one the gate refuses, under the model_type it saves; only a type whose
    defaults do not build or that saves another type's model_type ("gpt-sw3" saves "gpt2") lacks one."""
    gated = model_truth.refused_by_gate(RECORD)
    assert set(UNCHECKED) <= set(gated)
    assert all(config["model_type"] == model_type for model_type, config in UNCHECKED.items())
    buildable = [t for t in gated if not TYPES[t].get("config_error")]
    assert len(UNCHECKED) >= 0.98 * len(buildable) and len(UNCHECKED) > 400


ENCODERS = sorted(t for t in UNCHECKED if TYPES[t].get("inputs"))
#: vision / audio sub-configs the generic reader used to answer (a 2-D rotary read as 1-D)
NAMED_ENCODERS = ["qwen2_vl_vision", "pixtral", "llama4_vision_model", "siglip_vision_model", "mimi",
                  "qwen2_5_omni_audio_encoder"]
#: a text model type the truth generator could not build (DBRX, Bamba, ... today)
NOT_BUILT = next(t for t in sorted(UNCHECKED) if TYPES[t].get("failure") and not TYPES[t].get("inputs"))


@pytest.mark.parametrize("model_type", ENCODERS)
def test_encoder_refusal_names_what_its_positions_index(model_type):
    inputs = set(TYPES[model_type]["inputs"])
    units = "image patches" if inputs & {"image", "video"} else "audio frames" if "audio" in inputs else "steps"
    with pytest.raises(posenc.PosencError, match=rf"encoder, whose positions index [\w/ ]*{units}, not text tokens "
                                                 r"\(its modeling file has \w"):
        posenc.from_hf_config(UNCHECKED[model_type])


@pytest.mark.parametrize("model_type", NAMED_ENCODERS)
def test_vision_and_audio_sub_configs_are_refused_as_encoders(model_type):
    if TYPES[model_type]["golden"] != "unchecked":
        pytest.skip(f"{model_type} is {TYPES[model_type]['golden']} in these goldens")
    assert model_type in ENCODERS


def test_refusal_says_why_the_generator_could_not_build_it():
    with pytest.raises(posenc.PosencError) as caught:
        posenc.from_hf_config(UNCHECKED[NOT_BUILT])
    assert "the truth generator could not build it from its default config " \
           f"({TYPES[NOT_BUILT]['failure']})" in caught.value.message


def test_nested_language_config_is_gated_too():
    """A wrapper (no positions of its own) is read through its language config, whose model type
    is gated: Llava around a model type no golden checked is refused at config.text_config."""
    assert TYPES["llava"]["golden"] == "wrapper"
    config = {"model_type": "llava", "text_config": UNCHECKED[NOT_BUILT]}
    with pytest.raises(posenc.PosencError) as caught:
        posenc.from_hf_config(config)
    assert caught.value.field == "config.text_config.model_type"
    assert f"has not checked model type {NOT_BUILT!r}" in caught.value.message


def test_wrapper_without_a_language_config_is_refused():
    with pytest.raises(posenc.PosencError, match="has no positions of its own") as caught:
        posenc.from_hf_config({"model_type": "llava", "rope_theta": 10000.0, "hidden_size": 64,
                               "num_attention_heads": 4})
    assert caught.value.field == "config.model_type"


def test_wrapper_around_a_checked_language_model_answers():
    model = posenc.from_hf_config({"model_type": "llava", "text_config": {"model_type": "llama"}})
    assert model.get().spec.head_dim == 128


def test_model_type_transformers_does_not_know_is_refused_without_a_known_architecture():
    """A custom (remote-code) model type that names no transformers model class: nothing says which
    family's reading is right, so it is refused, naming its model type and architectures."""
    config = {"model_type": "my_remote_code_llm", "architectures": ["MyRemoteCodeForCausalLM"], "hidden_size": 256,
              "num_attention_heads": 4, "num_hidden_layers": 2, "rope_theta": 50000.0}
    assert "my_remote_code_llm" not in TYPES and "MyRemoteCodeForCausalLM" not in RECORD["architectures"]
    for strict in (True, False):
        with pytest.raises(posenc.PosencError) as caught:
            posenc.from_hf_config(config, strict=strict)
        assert caught.value.field == "config.model_type"
        assert "'my_remote_code_llm' is not one transformers" in caught.value.message
        assert "'MyRemoteCodeForCausalLM'" in caught.value.message


def test_model_type_transformers_does_not_know_is_read_by_its_architecture():
    config = {"model_type": "my_remote_code_llm", "architectures": ["Qwen3ForCausalLM"], "num_hidden_layers": 2}
    model = posenc.from_hf_config(config)
    assert model.model_type == "my_remote_code_llm" and model.reader == "qwen3"
    assert model.get().spec == posenc.from_hf_config({**config, "model_type": "qwen3"}).get().spec
    assert "read as 'qwen3'" in model.notes[0] and "Qwen3ForCausalLM" in model.notes[0]
    assert model.to_dict()["notes"] == list(model.notes)


def test_a_config_naming_no_model_type_describes_a_rope_by_its_keys():
    """No model_type and no architectures: not a model, a RoPE described by the standard keys."""
    config = {"hidden_size": 256, "num_attention_heads": 4, "num_hidden_layers": 2, "rope_theta": 50000.0}
    assert posenc.from_hf_config(config).get().spec.base == 50000.0
    with pytest.raises(posenc.PosencError, match="a config without a model_type is not one"):
        posenc.from_hf_config({**config, "architectures": ["MyRemoteCodeForCausalLM"]})


def test_architectures_name_model_classes_of_every_task_head():
    """checked.json's map covers the auto mappings' classes, each under the type whose config class builds it."""
    classes = RECORD["architectures"]
    assert classes["DeepseekV3ForCausalLM"] == "deepseek_v3" and classes["LlamaForSequenceClassification"] == "llama"
    assert classes["Qwen2VLForConditionalGeneration"] == "qwen2_vl" and len(classes) > 1000
    assert set(classes.values()) <= set(TYPES)


def test_family_readers_answer_whatever_the_record_says(monkeypatch):
    """Family readers are hand-verified: nllb-moe has one (and only the non-rotary golden), and
    answers even where the record calls it unchecked."""
    assert "nllb-moe" in READERS and TYPES["nllb-moe"]["golden"] in ("unchecked", "nonrotary")
    unchecked = {**RECORD, "model_types": {**TYPES, "nllb-moe": {**TYPES["nllb-moe"], "golden": "unchecked"}}}
    assert "nllb-moe" not in model_truth.refused_by_gate(unchecked)
    monkeypatch.setattr(checked, "record", lambda: unchecked)
    assert posenc.from_hf_config({"model_type": "nllb-moe"}).layer_types == ("encoder", "decoder")


def test_every_judged_exact_model_type_answers():
    exact = {t for t, e in TYPES.items() if e.get("verdict") == "exact"}
    answered = set()
    for case in model_truth.load()[1]:
        chain = model_truth.config_chain(case.config)
        if exact & set(chain):
            try:
                posenc.from_hf_config(case.config)
            except posenc.PosencError as exc:
                assert "has not checked" not in exc.message, exc.message
                continue
            answered |= set(chain)
    assert exact <= answered, sorted(exact - answered)


def test_record_is_generated_from_these_goldens():
    """checked.json is what generate_models.py writes from model_truth.npz and the family goldens,
    given the facts it read from transformers (kept in the record): a stale record fails here."""
    facts = {t: {k: e[k] for k in FACT_KEYS if k in e} for t, e in TYPES.items()}
    again = model_truth.with_verdicts(model_truth.coverage_record(facts, architectures=RECORD["architectures"]))
    assert again == RECORD, "regenerate: python tests/golden/generate_models.py --table"


def test_record_covers_every_model_type_transformers_knows():
    """Every model type transformers 5.24 knows; among them the rotary ones the truth generator enumerates."""
    assert set(model_truth.load()[0]["enumerated"]) <= set(TYPES)
    assert len(TYPES) > 800
