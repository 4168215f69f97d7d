"""posenc.from_hf_config against transformers itself for every non-rotary text model type.

The golden (tests/golden/model_truth_nonrotary.npz, from generate_nonrotary.py) holds each tiny
model's config and what its forward did with positions: which learned table it read at which
rows, the sinusoids it added, the T5 buckets and ALiBi biases it applied. Every case must be
exact or refused with a PosencError naming a config field: never wrong.
"""

import model_truth_nonrotary as truth
import pytest

META, CASES = truth.load()
IDS = [f"{c.model_type}|{c.variation}" for c in CASES]


@pytest.mark.parametrize("index", range(len(CASES)), ids=IDS)
def test_exact_or_refused_naming_a_config_field(index):
    verdict = truth.verdicts()[index][1]
    assert verdict.status != "wrong", verdict.detail
    if verdict.status == "refused":
        assert verdict.field.startswith("config"), verdict.detail


def test_golden_covers_every_non_rotary_model_type():
    built = {c.model_type for c in CASES if c.variation == "default"}
    assert built | set(META["failures"]) == set(META["enumerated"])
    assert len(META["enumerated"]) > 140 and len(built) > 110


def test_counts(capsys):
    counts = truth.counts()
    with capsys.disabled():
        print(f"\nnon-rotary model types: {counts}")
    assert counts["wrong"] == 0
    assert counts["exact"] >= 21  # the hand-written family readers' types at least
