"""posenc.from_hf_config against transformers itself for every non-rotary text model type.

The golden (tests/golden/model_truth_nonrotary.npz, from generate_nonrotary.py) holds each tiny
model's config and what its forward did with positions: which learned table it read at which
rows, the sinusoids it added, the T5 buckets and ALiBi biases it applied. Every case must be
exact or refused with a PosencError naming a config field: never wrong.
"""

import math

import model_truth_nonrotary as truth
import posenc
import pytest
from posenc.models import READERS, families  # noqa: F401  (families registers every reader)

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


VALUES = [None, True, False, 0, -1, 1, 3, 2**63, 10**400, 0.5, math.inf, math.nan, "", "x", "absolute", [], [1, 2],
          {}, {"a": 1}]
#: the readers this golden brought, and a default config of each (the golden's own)
NEW_READERS = ("absolute", "mpnet", "t2t")


def _read_keys(model_type: str) -> list[str]:
    """The keys the non-rotary readers read for this model type."""
    from posenc.models import absolute

    if model_type in absolute.TABLES:
        stacks, guards = absolute.TABLES[model_type]
        keys = [g[0] for g in guards]
        for table in stacks.values():
            keys += [table.rows, *((table.dim,) if isinstance(table.dim, str) else table.dim)]
        return keys + ["pad_token_id"]
    return ["d_model", "embed_dim", "hidden_size", "pad_token_id", "num_hidden_layers",
            "relative_attention_num_buckets", "max_position_embeddings"]


FUZZED = sorted(t for t in {c.config.get("model_type") for c in CASES if c.variation == "default"}
                if t in READERS and READERS[t].__module__.rsplit(".", 1)[-1] in NEW_READERS)


@pytest.mark.parametrize("model_type", FUZZED)
def test_reader_keys_any_json_value_answer_or_refuse_naming_the_key(model_type):
    config = next(c.config for c in CASES if c.variation == "default" and c.config.get("model_type") == model_type)
    for key in _read_keys(model_type):
        for value in VALUES:
            try:
                posenc.from_hf_config({**config, key: value})
            except posenc.PosencError as exc:
                assert exc.field.startswith("config"), (key, value, exc.field)
