"""A config.json, transformers' config object built from it and that object's `to_dict()` get the
same answer from posenc.from_hf_config, for every golden: every config of the per-layer truth
goldens (rotary and non-rotary, defaults, variations, legacy flat forms, composite configs) and
every real config under tests/fixtures/hf_configs.

transformers builds its config class from a config.json and the model runs with what the class
made; a reader that answered the file one way and the class's form another would be wrong on one
of them. Where the two cannot agree because transformers drops or ignores a value the file states
(DBRX's attn_config.rope_theta, MiniMax's rotary_dim), posenc answers both with the file's value
and says in `notes` what transformers computes instead (test_models_gate.py). The one refusal a
file may get where its to_dict() form is answered: a key its config class derives in a way posenc
does not mirror, named (class_defaults). A config the class itself refuses has no other form.
"""

import json
from pathlib import Path

import config_forms
import model_truth
import model_truth_nonrotary
import pytest

pytest.importorskip("transformers")

FIXTURES = Path(__file__).parent / "fixtures" / "hf_configs"
#: fixtures of model types transformers has no config class for (remote code only): no other form
REMOTE_ONLY = ("baichuan", "chatglm", "stablelm_epoch")
CASES = [(f"{c.model_type}|{c.variation}", c.config) for c in model_truth.load()[1]] + \
    [(f"{c.model_type}|{c.variation}", c.config) for c in model_truth_nonrotary.load()[1]] + \
    [(path.stem, json.loads(path.read_text())) for path in sorted(FIXTURES.glob("*.json"))]


@pytest.mark.parametrize("index", range(len(CASES)), ids=[name for name, _ in CASES])
def test_config_json_its_object_and_to_dict_agree(index):
    name, raw = CASES[index]
    if raw.get("model_type") in REMOTE_ONLY:
        pytest.skip(f"{raw['model_type']}: remote code only, transformers has no config class for it")
    try:
        obj = config_forms.config_object(raw)
    except Exception as exc:  # noqa: BLE001  (transformers' own validators: the class refuses this config)
        pytest.skip(f"transformers' config class refuses it: {type(exc).__name__}: {str(exc)[:120]}")
    as_file = config_forms.answer(raw)
    as_dict = config_forms.answer(config_forms.plain(obj.to_dict()))
    assert config_forms.answer(obj) == as_dict  # from_hf_config reads an object through its to_dict()
    if as_file != as_dict:
        assert config_forms.derivation_refused(as_file), f"{name}: the file -> {as_file}, its to_dict() -> {as_dict}"
        assert as_dict[0] == "answered", as_dict


def test_every_named_real_config_is_among_them():
    names = {name for name, _ in CASES}
    assert {"kimi-k2-instruct", "qwen3-next-80b-a3b", "gemma-3n-e4b", "dbrx-instruct", "hunyuan-7b-instruct",
            "hunyuan-a13b-instruct", "minimax-text-01-hf"} <= names
    assert len(CASES) > 1500
