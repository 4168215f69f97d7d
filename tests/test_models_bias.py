"""ALiBi (BLOOM, MPT) and T5 / mT5 / UMT5 relative buckets read from real configs, against the
values and model structure transformers 5.24 produces (tests/golden/generate_bias.py)."""

import numpy as np
import pytest

import posenc
from posenc.models.t5 import bias_tensors
from posenc.tables import TableSpec
from conftest import hf_config
from model_goldens import array, meta, model

LENGTH = 48  # key positions in the ALiBi goldens


def alibi_rows(spec) -> np.ndarray:
    """What posenc publishes for an ALiBi spec: row p = slopes * p, as float32 [H, L]."""
    table = TableSpec(spec, 0, LENGTH)
    rows = np.empty(table.shape, dtype=np.float32)
    table.fill(rows)
    return rows.T


def test_bloom_config():
    entry = model("bloom-560m").get()
    expected = meta("bloom-560m")
    assert entry.spec == posenc.encodings.AlibiSpec(expected["n_head"], variant="bloom")
    assert entry.layers == tuple(range(expected["n_layer"])) and entry.apply == "bias"
    assert expected["tensors"] == {}  # nothing positional in the checkpoint
    assert any("offset_alibi" in note for note in entry.notes)


@pytest.mark.parametrize("heads", [16, 12, 112])
def test_bloom_bias_within_an_ulp_of_build_alibi_tensor(heads):
    """BLOOM's slopes come from torch's float32 pow, which is not correctly rounded: posenc's
    correctly rounded slopes differ by at most one float32 ulp, so the bias by p ulps."""
    ours = alibi_rows(posenc.encodings.AlibiSpec(heads, variant="bloom"))
    theirs = array(f"bloom/alibi_h{heads}")
    slopes = posenc.alibi_slopes(heads, variant="bloom").astype(np.float32)
    tolerance = np.arange(LENGTH)[None, :] * np.spacing(slopes)[:, None] + np.spacing(np.abs(theirs))
    assert (np.abs(ours - theirs) <= tolerance).all()


def test_mpt_config():
    entry = model("mpt-7b").get()
    expected = meta("mpt-7b")
    assert expected["alibi"] is True
    assert entry.spec == posenc.encodings.AlibiSpec(expected["n_heads"], variant="mpt",
                                                    alibi_bias_max=expected["alibi_bias_max"])
    assert entry.layers == tuple(range(expected["n_layers"])) and entry.apply == "bias"


@pytest.mark.parametrize("heads, bias_max", [(32, 8), (12, 8), (12, 16), (7, 4)])
def test_mpt_bias_equals_build_mpt_alibi_tensor(heads, bias_max):
    """build_mpt_alibi_tensor's [H, L] is the causal bias of the last query: -m (L-1 - j)."""
    ours = posenc.alibi_bias(heads, 1, LENGTH, q_offset=LENGTH - 1, variant="mpt", alibi_bias_max=bias_max,
                             dtype="float32")[:, 0]
    np.testing.assert_array_equal(ours, array(f"mpt/alibi_h{heads}_max{bias_max}"))
    # posenc's published rows differ from it by a constant per head (softmax-invariant)
    rows = alibi_rows(posenc.encodings.AlibiSpec(heads, variant="mpt", alibi_bias_max=bias_max))
    constant = (LENGTH - 1) * posenc.alibi_slopes(heads, variant="mpt", alibi_bias_max=bias_max)[:, None]
    np.testing.assert_allclose(rows - ours, np.broadcast_to(constant, rows.shape), rtol=1e-6)


def test_mpt_model_ignores_the_configs_alibi_bias_max():
    """The reference's own difference: MptModel builds its bias with alibi_bias_max 8 even when
    attn_config says 16. posenc follows the config and says so in the notes."""
    theirs = array("mpt/model_bias_h12_config_max16")
    assert np.array_equal(posenc.alibi_bias(12, 1, 16, q_offset=15, variant="mpt", dtype="float32")[:, 0], theirs)
    entry = posenc.from_hf_config({"model_type": "mpt", "n_heads": 12, "attn_config": {"alibi_bias_max": 16}}).get()
    assert entry.spec.alibi_bias_max == 16 and any("would use 8" in note for note in entry.notes)


@pytest.mark.parametrize("name", ["t5-small", "mt5-small", "umt5-small"])
def test_t5_family_structure(name):
    """Which layers use a bias, which hold its table, bucket settings and direction per stack,
    and the tables' checkpoint names: all as the model transformers builds from the config."""
    positions = model(name)
    expected = meta(name)
    assert positions.layer_types == ("encoder", "decoder")
    for stack in ("encoder", "decoder"):
        entry, theirs = positions[stack], expected[stack]
        assert entry.spec == posenc.T5BucketSpec(theirs["num_buckets"], max_distance=theirs["max_distance"],
                                                 bidirectional=not theirs["is_decoder"])
        assert entry.layers == tuple(range(theirs["layers"])) and entry.apply == "bias"
        names = bias_tensors(positions.model_type, stack, theirs["layers"])
        assert names == tuple(f"{stack}.block.{i}.layer.0.SelfAttention.relative_attention_bias.weight"
                              for i in theirs["with_table"])
        for tensor in names:
            assert expected["tensors"][tensor] == [theirs["num_buckets"], hf_config(name)["num_heads"]]
        assert any(tensor in note for note in entry.notes for tensor in names[:1])
    assert len(expected["tensors"]) == sum(len(bias_tensors(name.split("-")[0], s, expected[s]["layers"]))
                                           for s in ("encoder", "decoder"))


@pytest.mark.parametrize("model_type", ["t5", "umt5"])
@pytest.mark.parametrize("stack", ["encoder", "decoder"])
def test_position_bias_equals_compute_bias(model_type, stack):
    """t5_position_bias(table) is compute_bias: [heads, q, k], queries after `past` cached tokens."""
    info = meta(f"{model_type}/{stack}")
    spec = posenc.T5BucketSpec(info["num_buckets"], max_distance=info["max_distance"], bidirectional=stack == "encoder")
    ours = posenc.t5_position_bias(array(f"{model_type}/{stack}/weight"), spec, info["query_length"],
                                   info["key_length"], query_offset=info["past"])
    np.testing.assert_array_equal(ours, array(f"{model_type}/{stack}/bias"))


@pytest.mark.parametrize("stack", ["encoder", "decoder"])
def test_umt5_buckets(stack):
    """UMT5Attention's own bucket method (it reads direction and sizes from the config)."""
    info = meta(f"umt5/{stack}")
    spec = posenc.T5BucketSpec(info["num_buckets"], max_distance=info["max_distance"], bidirectional=stack == "encoder")
    np.testing.assert_array_equal(posenc.t5_relative_position_bucket(np.arange(-400, 401), spec),
                                  array(f"umt5/{stack}/buckets"))


def test_position_bias_checks_its_inputs():
    spec = posenc.T5BucketSpec(32)
    for call, field in [
        (lambda: posenc.t5_position_bias(np.zeros((16, 2)), spec, 4), "weight"),
        (lambda: posenc.t5_position_bias(np.zeros((32, 2), dtype=np.int32), spec, 4), "weight"),
        (lambda: posenc.t5_position_bias([["a"]], spec, 4), "weight"),
        (lambda: posenc.t5_position_bias(np.zeros((32, 2)), spec, 0), "query_length"),
        (lambda: posenc.t5_position_bias(np.zeros((32, 2)), spec, 4, "x"), "key_length"),
        (lambda: posenc.t5_position_bias(np.zeros((32, 2)), spec, 4, query_offset=-1), "query_offset"),
        (lambda: posenc.t5_position_bias(np.zeros((32, 2)), spec, 10**6, 10**6), "query_length"),  # output limit
        (lambda: posenc.t5_position_bias(np.zeros((32, 2)), "spec", 4), "spec"),
        (lambda: posenc.t5_relative_position_bucket([1], spec, num_buckets=8), "spec"),
    ]:
        with pytest.raises(posenc.PosencError) as info:
            call()
        assert info.value.field == field


def test_bucket_spec_validation_and_identity():
    spec = posenc.T5BucketSpec(32, max_distance=128, bidirectional=False)
    assert posenc.T5BucketSpec.from_dict(spec.to_dict()) == spec and spec.hash != posenc.T5BucketSpec(32).hash
    np.testing.assert_array_equal(posenc.t5_relative_position_bucket(np.arange(-50, 50), spec),
                                  posenc.t5_relative_position_bucket(np.arange(-50, 50), bidirectional=False))
    for kwargs, field in [({"num_buckets": 3}, "num_buckets"), ({"num_buckets": True}, "num_buckets"),
                          ({"max_distance": 8}, "max_distance"), ({"bidirectional": 1}, "bidirectional"),
                          ({"max_distance": "128"}, "max_distance")]:
        with pytest.raises(posenc.PosencError) as info:
            posenc.T5BucketSpec(**{"num_buckets": 32, **kwargs})
        assert info.value.field == field
