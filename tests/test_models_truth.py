"""posenc.from_hf_config against transformers itself, layer by layer, for every rotary model type.

The goldens (tests/golden/model_truth.npz, from generate_models.py) hold each tiny model's
config and, per layer, the rotation its own apply function applied at the probe positions.
Every case must be exact or refused with a PosencError naming the mechanism: never wrong.
docs/models.md is the table of these verdicts; it must be the one the goldens give.
"""

from pathlib import Path

import model_truth
import pytest

META, CASES = model_truth.load()
IDS = [f"{c.model_type}|{c.variation}" for c in CASES]


@pytest.mark.parametrize("index", range(len(CASES)), ids=IDS)
def test_exact_or_refused_naming_the_mechanism(index):
    verdict = model_truth.verdicts()[index][1]
    assert verdict.status != "wrong", verdict.detail
    if verdict.status == "refused":  # the field: the config key or mechanism posenc does not read
        assert verdict.detail.startswith("config"), verdict.detail


def test_goldens_cover_every_rotary_model_type():
    judged = {c.model_type for c in CASES if c.variation == "default"}
    assert judged | set(META["failures"]) == set(META["enumerated"])
    assert len(META["enumerated"]) > 300


def test_default_configs_are_mostly_exact():
    judged = model_truth.judged_defaults()
    exact = sum(v.status == "exact" for v in judged.values())
    assert len(judged) > 140 and exact >= 0.95 * len(judged), f"{exact}/{len(judged)} exact"


def test_rotary_and_non_rotary_together_are_mostly_exact():
    import model_truth_nonrotary

    rotary = [v.status for v in model_truth.judged_defaults().values()]
    other = [v.status for v in model_truth_nonrotary.judged_defaults().values()]
    both = rotary + other
    assert both.count("wrong") == 0 and both.count("exact") >= 0.95 * len(both), \
        f"{both.count('exact')}/{len(both)} exact"


def test_model_table_is_generated_from_these_goldens():
    docs = Path(__file__).parent.parent / "docs" / "models.md"
    assert docs.read_text() == model_truth.table_markdown(), "regenerate: python tests/golden/generate_models.py"
