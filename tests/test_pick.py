"""`posenc pick`: a table of scenarios (new models and checkpoints, every budget and latency), each
answer's evidence checked against what it cites (the lab row at its JSON path, a known primary
source, the config's own key), the data-driven choices checked against an independent reading of
the lab file and shown to follow the file (a run with other numbers gives another answer), the
config.json keys it offers accepted by transformers' own config class and RoPE initialisers with
the same frequencies posenc computes, every model config in tests/fixtures answered or refused with
a field, and the CLI and HTTP forms."""

from __future__ import annotations

import copy
import json
import math
import re

import numpy as np
import pytest
from audit_recipes import CONFIGS, config
from fastapi.testclient import TestClient
from posenc import alibi_slopes, from_hf_config
from posenc.cli import main
from posenc.config import ServiceConfig
from posenc.errors import PosencError
from posenc.http import create_app
from posenc.lab import results
from posenc.pick import pick
from posenc.pick.sources import SOURCES
from posenc.plots.sources import spec_from_dict
from shm_support import published_config

DOC = results.documented()
#: Llama-2-7B's config.json, the position keys as published (4,096 positions, base 10,000, no scaling).
LLAMA2 = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
          "intermediate_size": 11008, "num_attention_heads": 32, "num_key_value_heads": 32, "num_hidden_layers": 32,
          "max_position_embeddings": 4096, "rope_theta": 10000.0, "rope_scaling": None, "vocab_size": 32000}
TEST_TIME = ("rope_linear", "rope_ntk", "rope_dynamic", "rope_yarn")
TRAINED = ("rope", "alibi", "rope_alibi", "sinusoidal", "learned", "nope")


# --- an independent reading of the lab file (the oracle of the data-driven choices) ----------------------

def points(doc: dict, task: str, scheme: str) -> list[dict]:
    return next(run["evaluations"][scheme] for run in doc["results"] if run["task"] == task
                and scheme in run["evaluations"])


def lm_best(doc: dict, schemes, ratio: float) -> str:
    """The scheme of `schemes` with the lowest perplexity at the first length >= ratio x training length."""
    train_len = doc["configuration"]["tasks"]["lm"]["geometry"]["train_len"]
    lengths = [p["length"] for p in points(doc, "lm", "rope")]
    length = next((n for n in lengths if n >= ratio * train_len), lengths[-1])
    at = {s: next(p["perplexity"] for p in points(doc, "lm", s) if p["length"] == length) for s in schemes}
    return min(at, key=at.get)


def favouring(scheme: str, perplexity: float = 1.5) -> dict:
    """The documented run with `scheme`'s language-model perplexity set to `perplexity` at every length."""
    doc = copy.deepcopy(DOC)
    for p in points(doc, "lm", scheme):
        p["perplexity"] = perplexity
    return doc


# --- what every answer must satisfy ---------------------------------------------------------------------

def vars_of(spec) -> dict:
    return {name: getattr(spec, name) for name in dir(spec) if not name.startswith("_")}


PATH = re.compile(r"results\[(\d+)\]\.evaluations\.(\w+)\[(\d+)\]")


def check(answer, doc: dict = DOC, model_config: dict | None = None) -> None:
    """Every reason and note has evidence, and each piece says what its source says."""
    assert answer.reasons
    for reason in (*answer.reasons, *answer.notes):
        assert reason.evidence, reason.text
        for e in reason.evidence:
            if e["kind"] == "lab":
                run, scheme, index = PATH.fullmatch(e["path"]).groups()
                run = doc["results"][int(run)]
                point = run["evaluations"][scheme][int(index)]
                assert (run["task"], scheme, point["length"]) == (e["task"], e["scheme"], e["length"])
                assert point[e["metric"]] == e["value"]
            elif e["kind"] == "source":
                assert SOURCES[e["id"]].cite() == e and e["url"].startswith("https://")
            else:  # the config's own key, or the value posenc read from it (a family's other key for it)
                assert e["kind"] == "config" and model_config is not None
                specs = [entry.spec for entry in from_hf_config(model_config).encodings.values()]
                stated = [model_config, model_config.get("rope_scaling") or {}]
                stated += [vars_of(spec) for spec in specs] + [spec.scaling for spec in specs if spec.KIND == "rope"]
                assert any(holder.get(e["key"]) == e["value"] for holder in stated), e
    for reason in answer.reasons:  # a reason quotes the numbers it cites
        for e in reason.evidence:
            if e["kind"] == "lab" and e["value"] is not None:
                shown = f"{e['value']:.3f}" if e["metric"] == "accuracy" else f"{e['value']:.2f}"
                assert shown in reason.text, (shown, reason.text)
    if answer.config_patch is not None:  # the patch reads back as the recommended encoding
        read = from_hf_config({**model_config, **answer.config_patch}).get().spec
        target = answer.scenario["target_context"]
        expected = spec_from_dict(answer.spec, "spec")
        assert np.array_equal(read.inv_freq(float(target))[0], expected.inv_freq(float(target))[0])
        assert read.inv_freq(float(target))[1] == expected.inv_freq(float(target))[1]
    json.dumps(answer.to_dict(), allow_nan=False)
    text = answer.to_text()  # what the CLI prints: every piece of evidence on a line of its own
    assert text.count("\n     [") == sum(len(r.evidence) for r in (*answer.reasons, *answer.notes))


# --- the scenario table ---------------------------------------------------------------------------------

def test_new_model_without_extrapolation_is_rope_unless_the_lab_says_otherwise():
    answer = pick(4096)
    check(answer)
    best = lm_best(DOC, TRAINED, 1)
    at = {s: points(DOC, "lm", s)[0]["perplexity"] for s in TRAINED}
    assert answer.scheme == ("rope" if at["rope"] <= 1.02 * at[best] else best)
    if answer.scheme == "rope":  # Men et al.'s bound 0.0424 * 4096^1.628 = 3.2e4, rounded up
        assert answer.parameters == {"base": 40000.0, "head_dim": 128, "max_position_embeddings": 4096}
        assert any(e["kind"] == "source" and e["id"] == "men2024" for r in answer.reasons for e in r.evidence)


@pytest.mark.parametrize("target, base", [(2048, 20000.0), (8192, 100000.0), (32768, 1e6), (131072, 1e7)])
def test_a_new_rope_models_base_follows_the_published_bound(target, base):
    assert math.ceil(0.0424 * target**1.628 / 10 ** math.floor(math.log10(0.0424 * target**1.628))) * \
        10 ** math.floor(math.log10(0.0424 * target**1.628)) == base
    answer = pick(target, results=favouring("rope", 1.0))
    assert answer.scheme == "rope" and answer.parameters["base"] == base and answer.spec["base"] == base


@pytest.mark.parametrize("train_context", [None, 2048, 1024])
def test_new_model_that_must_extrapolate_gets_the_labs_best_at_that_ratio(train_context):
    answer = pick(8192, extrapolate=True, train_context=train_context, n_heads=8)
    check(answer)
    ratio = 8192 / train_context if train_context else 8
    assert answer.scheme == lm_best(DOC, TRAINED, ratio)
    if answer.scheme == "alibi":
        assert answer.parameters["slopes"] == alibi_slopes(8).tolist()
        assert answer.spec == {"kind": "alibi", "n_heads": 8, "variant": "paper", "alibi_bias_max": 8.0}


def test_a_tight_latency_alibi_answer_names_the_fused_kernel_and_the_unfused_memory():
    answer = pick(8192, extrapolate=True, n_heads=32, latency="tight", results=favouring("alibi", 1.0))
    assert answer.scheme == "alibi"
    latency = [r for r in answer.reasons if r.text.startswith("latency")]
    assert len(latency) == 1 and "4.0 GiB" in latency[0].text  # 32 heads x 8192^2 x 2 bytes
    assert latency[0].evidence[0]["id"] == "flash_attn_alibi"


def test_the_choice_follows_the_results_file():
    """The same question, a lab run whose ALiBi diverged: the next best trained scheme."""
    doc = favouring("alibi", 1000.0)
    answer = pick(8192, extrapolate=True, results=doc)
    check(answer, doc)
    assert answer.scheme != "alibi" and answer.scheme == lm_best(doc, TRAINED, 8)
    assert answer.lab["file"] == "the posted results"


def test_extend_llama2_without_training_takes_the_labs_best_test_time_scaling():
    answer = pick(32768, config=LLAMA2)
    check(answer, model_config=LLAMA2)
    assert answer.scenario["goal"] == "extend" and answer.scenario["training_budget"] == "none"
    assert answer.scheme == lm_best(DOC, TEST_TIME, 8)
    assert answer.notes and any("copy" in note.text for note in answer.notes)


def test_tight_latency_leaves_dynamic_ntk_out():
    answer = pick(16384, config=LLAMA2, latency="tight", results=favouring("rope_dynamic"))
    check(answer, model_config=LLAMA2)
    assert answer.scheme != "rope_dynamic"
    assert any(e.get("id") == "hf_dynamic" for r in answer.reasons for e in r.evidence)


def test_extend_with_a_fine_tune_is_yarn_with_its_attention_factor():
    answer = pick(32768, config=LLAMA2, training_budget="fine_tune", extrapolate=True)
    check(answer, model_config=LLAMA2)
    assert answer.scheme == "rope_yarn"
    assert answer.config_patch == {"rope_scaling": {"rope_type": "yarn", "factor": 8.0,
                                                    "original_max_position_embeddings": 4096},
                                   "rope_theta": 10000.0, "max_position_embeddings": 32768}
    assert answer.computed["attention_factor"] == pytest.approx(0.1 * math.log(8) + 1, rel=1e-15)
    assert {e.get("id") for r in answer.reasons for e in r.evidence} >= {"peng2023", "chen2023"}


def test_extend_with_full_training_raises_the_base():
    answer = pick(32768, config=LLAMA2, training_budget="full")
    check(answer, model_config=LLAMA2)
    assert answer.scheme == "rope" and answer.parameters["base"] == 1e6
    assert answer.config_patch == {"rope_scaling": None, "rope_theta": 1e6, "max_position_embeddings": 32768}


def test_a_scaled_checkpoint_keeps_its_scaling_type_with_a_new_factor():
    qwen = config("qwen2-7b-yarn")
    original = qwen["rope_scaling"]["original_max_position_embeddings"]
    answer = pick(8 * original, config=qwen)
    check(answer, model_config=qwen)
    assert answer.scheme == "rope_yarn" and answer.parameters["factor"] == 8.0
    assert answer.config_patch["rope_scaling"]["original_max_position_embeddings"] == original
    vicuna = config("vicuna-7b-16k")  # linear x4 over max_position_embeddings 4096: the original, or not?
    with pytest.raises(PosencError) as refused:
        pick(32768, config=vicuna)
    assert refused.value.field == "config.rope_scaling" and "original_max_position_embeddings" in str(refused.value)
    vicuna["rope_scaling"]["original_max_position_embeddings"] = 4096  # said: 16384 positions now
    assert pick(16384, config=vicuna).scheme == "unchanged"
    answer = pick(32768, config=vicuna)
    check(answer, model_config=vicuna)
    assert answer.scheme == "rope_linear" and answer.parameters["factor"] == 32768 / 4096


@pytest.mark.parametrize("name, target, scheme, source", [
    ("llama-3.1-8b", 65536, "unchanged", None),  # within its stated 131072
    ("mpt-7b", 65536, "unchanged", "press2022"),  # ALiBi
    ("t5-small", 65536, "unchanged", "raffel2020"),  # relative buckets (encoder and decoder)
    ("gpt2", 4096, None, None),  # learned rows: training needed (a budget of none is refused)
])
def test_checkpoints_that_need_no_change_or_cannot_scale(name, target, scheme, source):
    model = config(name)
    if scheme is None:
        with pytest.raises(PosencError) as refused:
            pick(target, config=model)
        assert refused.value.field == "training_budget"
        answer = pick(target, config=model, training_budget="fine_tune")
        assert answer.scheme == "learned" and answer.parameters == {"num_positions": target}
        check(answer, model_config=model)
        return
    answer = pick(target, config=model)
    check(answer, model_config=model)
    assert answer.scheme == scheme and answer.config_patch is None
    if source:
        assert any(e.get("id") == source for r in answer.reasons for e in r.evidence)


def test_no_config_extends_an_assumed_rope_model_and_offers_no_patch():
    answer = pick(16384, original_context=4096, training_budget="fine_tune", head_dim=64)
    check(answer)
    assert answer.scheme == "rope_yarn" and answer.config_patch is None
    assert answer.spec["head_dim"] == 64 and answer.spec["original_max_position_embeddings"] == 4096


@pytest.mark.parametrize("kwargs, field", [
    ({"target_context": 1}, "target_context"),
    ({"target_context": 4096, "training_budget": "none"}, "training_budget"),
    ({"target_context": 4096, "goal": "extend"}, "config"),
    ({"target_context": 4096, "train_context": 8192}, "train_context"),
    ({"target_context": 4096, "goal": "train", "config": LLAMA2}, "config"),
    ({"target_context": 4096, "config": LLAMA2, "original_context": 4096}, "original_context"),
    ({"target_context": 4096, "n_heads": 0}, "n_heads"),
    ({"target_context": 4096, "head_dim": 63}, "head_dim"),
    ({"target_context": 4096, "latency": "fast"}, "latency"),
    ({"target_context": 4096, "extrapolate": "yes"}, "extrapolate"),
    ({"target_context": 4096, "results": {"format": "other"}}, "results"),
    ({"target_context": 262144, "config": config("llama-3.1-8b")}, "config.rope_scaling"),
    ({"target_context": 262144, "config": config("gemma-3-1b")}, "config"),
])
def test_bad_questions_are_refused_naming_the_field(kwargs, field):
    with pytest.raises(PosencError) as refused:
        pick(**kwargs)
    assert refused.value.field == field


# --- transformers agrees with every config.json patch ---------------------------------------------------

@pytest.mark.parametrize("budget, favoured", [("none", s) for s in TEST_TIME] + [("fine_tune", None), ("full", None)])
def test_transformers_reads_each_patch_as_posenc_computes_it(budget, favoured):
    torch = pytest.importorskip("torch")
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    target = 32768
    answer = pick(target, config=LLAMA2, training_budget=budget, results=favouring(favoured) if favoured else None)
    if favoured:
        assert answer.scheme == favoured
    hf = LlamaConfig(**{**LLAMA2, **answer.config_patch})
    rope_type = hf.rope_parameters["rope_type"]
    if rope_type == "default":
        inv_freq, attention = LlamaRotaryEmbedding.compute_default_rope_parameters(hf)
    elif rope_type == "dynamic":  # at the target length, as transformers' dynamic update recomputes it
        inv_freq, attention = ROPE_INIT_FUNCTIONS[rope_type](hf, torch.device("cpu"), seq_len=target)
    else:
        inv_freq, attention = ROPE_INIT_FUNCTIONS[rope_type](hf, torch.device("cpu"))
    ours, our_attention = spec_from_dict(answer.spec, "spec").inv_freq(float(target))
    np.testing.assert_allclose(inv_freq.double().numpy(), ours, rtol=3e-7)  # transformers computes in float32
    assert attention == pytest.approx(our_attention, rel=1e-12)


# --- the universe: every model config in the fixtures ---------------------------------------------------

@pytest.mark.parametrize("name", sorted(path.stem for path in CONFIGS.glob("*.json")))
def test_every_fixture_config_is_answered_with_evidence_or_refused_with_a_field(name):
    model = config(name)
    for target in (4096, 1 << 20):
        for budget in ("none", "fine_tune", "full"):
            try:
                answer = pick(target, config=model, training_budget=budget)
            except PosencError as refused:
                assert refused.field and refused.message
                continue
            check(answer, model_config=model)


# --- the CLI and HTTP forms -----------------------------------------------------------------------------

def test_cli_prints_reasons_and_writes_a_config_posenc_reads(tmp_path, capsys):
    source, patched = tmp_path / "config.json", tmp_path / "patched.json"
    source.write_text(json.dumps(LLAMA2))
    assert main(["pick", "--target-context", "32768", "--model-config", str(source), "--training-budget",
                 "fine_tune", "--patched-config", str(patched)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("posenc pick: extend a model to 32,768 positions; training budget fine_tune")
    assert "recommend: RoPE with YaRN, factor 8 over the original 4,096" in out
    assert "[peng2023]" in out and "https://arxiv.org/abs/2309.00071" in out
    assert main(["positions", str(patched), "--positions", "0,32767", "--json"]) == 0
    read = json.loads(capsys.readouterr().out)
    assert read["layer_types"]["default"]["spec"]["scaling"]["factor"] == 8.0
    assert main(["pick", "--target-context", "32768", "--model-config", str(source), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == pick(32768, config=LLAMA2).to_dict()
    assert main(["pick", "--target-context", "4096", "--training-budget", "none"]) == 2
    assert "training_budget" in capsys.readouterr().err


@pytest.fixture(scope="module")
def client():
    def service(root: str) -> ServiceConfig:
        return ServiceConfig.from_dict({"server": {"shm_dir": root}, "tables": []})

    with published_config("posenc-pick-test-", service) as (cfg, _), TestClient(create_app(cfg)) as c:
        yield c


def test_http_answers_as_the_library(client):
    response = client.post("/v1/pick", json={"target_context": 32768, "hf_config": LLAMA2})
    assert response.status_code == 200, response.text
    assert response.json() == json.loads(json.dumps(pick(32768, config=LLAMA2).to_dict()))
    doc = favouring("rope_ntk")
    response = client.post("/v1/pick", json={"target_context": 32768, "hf_config": LLAMA2, "results": doc})
    assert response.status_code == 200 and response.json()["recommendation"]["scheme"] == "rope_ntk"


@pytest.mark.parametrize("body, field", [
    ({"target_context": 262144, "hf_config": config("llama-3.1-8b")}, "hf_config.rope_scaling"),
    ({"target_context": 4096, "goal": "extend"}, "hf_config"),
    ({"target_context": 4096, "training_budget": "none"}, "training_budget"),
    ({"target_context": 1}, "target_context"),
    ({"target_context": 4096, "results": {"format": "posenc-lab/1"}}, "results"),
])
def test_http_refusals_name_the_field(client, body, field):
    response = client.post("/v1/pick", json=body)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == field


def test_the_docs_list_every_source_pick_cites():
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "pick.md").read_text()
    for source in SOURCES.values():
        assert f"| `{source.key}` | [{source.title}]({source.url})" in page


def test_a_results_file_of_some_schemes_only_still_answers_from_what_it_holds():
    """A researcher's rerun of `--schemes rope,rope_yarn --tasks lm`: answers cite only what it holds."""
    doc = copy.deepcopy(DOC)
    doc["results"] = [run for run in doc["results"] if run["task"] == "lm" and run["trained_as"] == "rope"]
    for run in doc["results"]:
        run["evaluations"] = {s: p for s, p in run["evaluations"].items() if s in ("rope", "rope_yarn")}
    assert pick(8192, extrapolate=True, results=doc).scheme == "rope"
    answer = pick(32768, config=LLAMA2, results=doc)
    check(answer, doc, LLAMA2)
    assert answer.scheme == "rope_yarn"
    mpt = config("mpt-7b")
    answer = pick(65536, config=mpt, results=doc)
    check(answer, doc, mpt)
    assert answer.scheme == "unchanged" and [e["id"] for r in answer.reasons for e in r.evidence] == ["press2022"]
