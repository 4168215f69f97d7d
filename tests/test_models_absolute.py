"""Absolute positions added to the embeddings: sinusoidal (Marian, M2M100, Whisper's encoder)
and learned tables (GPT-2, OPT, BERT, RoBERTa / XLM-R, BART / mBART, Whisper's decoder), read
from real configs and checked against transformers 5.24 (tests/golden/generate_bias.py):
table values, where positions start (offsets, padding, cache), and the checkpoint tensors."""

import numpy as np
import pytest

import posenc
from model_goldens import array, float32_angle_tolerance, meta, model


def assert_float32_sinusoids(ours: np.ndarray, theirs: np.ndarray, spec, positions) -> None:
    """posenc's exact float64 rows against transformers' float32-angle rows."""
    angle = np.abs(np.asarray(positions, dtype=np.float64))[:, None] * spec.freqs.max()
    assert ours.shape == theirs.shape
    assert (np.abs(ours - theirs) <= float32_angle_tolerance(angle)).all()


# --- sinusoidal ---------------------------------------------------------------------------
@pytest.mark.parametrize("name, cls", [("opus-mt-en-de", "MarianSinusoidalPositionalEmbedding"),
                                       ("pegasus-xsum", "PegasusSinusoidalPositionalEmbedding")])
def test_marian_and_pegasus_config(name, cls):
    positions = model(name)
    expected = meta(name)
    for stack in ("encoder", "decoder"):
        entry = positions[stack]
        assert expected[f"{stack}_class"] == cls and expected[f"{stack}_offset"] == 0
        assert entry.spec == posenc.SinusoidalSpec(expected["d_model"], layout="halves")
        assert entry.apply == "add" and entry.layers == ()


@pytest.mark.parametrize("family", ["marian", "pegasus"])
@pytest.mark.parametrize("dim", [16, 17])
def test_marian_table_is_exact(family, dim):
    """Marian / Pegasus form the angles in float64 (numpy) and store float32: posenc's float32 rows are identical."""
    ours = posenc.sinusoidal(np.arange(64), dim, layout="halves")
    np.testing.assert_array_equal(ours, array(f"{family}/table_d{dim}"))
    np.testing.assert_array_equal(posenc.sinusoidal(np.arange(5, 15), dim, layout="halves"),
                                  array(f"{family}/forward_d{dim}_cache5"))  # positions continue after the cache


@pytest.mark.parametrize("dim", [16, 17])
def test_distilbert_sinusoidal_option(dim):
    """`sinusoidal_pos_embds`: create_sinusoidal_embeddings's interleaved table, float64 angles: exact."""
    spec = posenc.from_hf_config({"model_type": "distilbert", "dim": dim, "sinusoidal_pos_embds": True}).get().spec
    assert spec == posenc.SinusoidalSpec(dim, layout="interleaved")
    np.testing.assert_array_equal(posenc.sinusoidal(np.arange(64), dim, layout=spec.layout),
                                  array(f"distilbert/sinusoidal_d{dim}"))


def test_distilbert_model_initialises_its_table_to_the_sinusoids():
    """DistilBertModel(sinusoidal_pos_embds) starts from these values, and in transformers 5.24 the
    table stays trainable (older versions froze it): a fine-tuned checkpoint may hold others."""
    np.testing.assert_array_equal(posenc.sinusoidal(np.arange(16), 8), array("distilbert/tiny_sinusoidal_table"))
    assert meta("distilbert-sinusoidal")["trainable"] is True


def test_m2m100_config():
    positions = model("m2m100-418m")
    expected = meta("m2m100-418m")
    for stack in ("encoder", "decoder"):
        assert expected[f"{stack}_class"] == "M2M100SinusoidalPositionalEmbedding"
        assert positions[stack].spec == posenc.SinusoidalSpec(expected["d_model"], layout="t2t",
                                                              offset=expected[f"{stack}_padding_idx"] + 1)


@pytest.mark.parametrize("dim", [16, 17])
def test_m2m100_rows_and_padding(dim):
    spec = posenc.from_hf_config({"model_type": "m2m_100", "d_model": dim, "pad_token_id": 1})["encoder"].spec
    table = array(f"m2m100/table_d{dim}")  # row r: position r - (padding_idx + 1); row padding_idx is zero
    rows = np.arange(table.shape[0]) - spec.offset
    ours = posenc.sinusoidal(rows, dim, layout="t2t", offset=spec.offset, dtype="float64")
    real = np.arange(table.shape[0]) != 1
    assert_float32_sinusoids(ours[real], table[real], spec, rows[real] + spec.offset)
    assert not table[1].any()
    forward = array(f"m2m100/forward_d{dim}")
    first = posenc.sinusoidal(np.arange(6), dim, layout="t2t", offset=spec.offset, dtype="float64")
    assert_float32_sinusoids(first, forward[0], spec, np.arange(6) + 2)
    # left padding: pad tokens read the zero row, the real tokens still start at position 0
    assert not forward[1, :2].any()
    assert_float32_sinusoids(first[:4], forward[1, 2:], spec, np.arange(4) + 2)
    cached = posenc.sinusoidal(np.arange(3, 9), dim, layout="t2t", offset=spec.offset, dtype="float64")
    assert_float32_sinusoids(cached, array(f"m2m100/forward_d{dim}_cache3")[0], spec, np.arange(3, 9) + 2)


@pytest.mark.parametrize("dim", [16, 17])
def test_nllb_moe_positions_are_m2m100s(dim):
    spec = posenc.from_hf_config({"model_type": "nllb-moe", "d_model": dim})["encoder"].spec
    assert spec == posenc.from_hf_config({"model_type": "m2m_100", "d_model": dim})["encoder"].spec
    forward = array(f"nllb_moe/forward_d{dim}")
    first = posenc.sinusoidal(np.arange(6), dim, layout="t2t", offset=spec.offset, dtype="float64")
    assert_float32_sinusoids(first, forward[0], spec, np.arange(6) + 2)
    assert not forward[1, :2].any()
    assert_float32_sinusoids(first[:4], forward[1, 2:], spec, np.arange(4) + 2)


def test_xglm_config_and_rows():
    entry = model("xglm-564m").get()
    expected = meta("xglm-564m")
    assert expected["decoder_class"] == "XGLMSinusoidalPositionalEmbedding" and expected["tensors"] == {}
    assert entry.spec == posenc.SinusoidalSpec(expected["d_model"], layout="t2t", offset=expected["decoder_offset"])
    for dim in (16, 17):
        spec = posenc.from_hf_config({"model_type": "xglm", "d_model": dim}).get().spec
        for positions, key in ((np.arange(6), f"xglm/forward_d{dim}"), (np.arange(3, 9), f"xglm/forward_d{dim}_cache3")):
            ours = posenc.sinusoidal(positions, dim, layout="t2t", offset=spec.offset, dtype="float64")
            assert_float32_sinusoids(ours, array(key)[0], spec, positions + 2)
    with pytest.raises(posenc.PosencError) as refused:  # a zero row no sinusoidal spec has: refused
        posenc.from_hf_config({"model_type": "xglm", "pad_token_id": 5})
    assert refused.value.field == "config.pad_token_id" and "position 3 adds nothing" in refused.value.message
    quirk = array("xglm/forward_d16_pad5")[0]  # the reference's own: position 3 reads the zeroed row 5
    assert not quirk[3].any() and all(quirk[i].any() for i in (0, 1, 2, 4, 5))


def test_m2m100_real_size_rows():
    spec = model("m2m100-418m")["encoder"].spec
    rows = np.array(meta("rows")["m2m100_d1024"])
    theirs = array("m2m100/table_d1024_rows")
    ours = posenc.sinusoidal(rows - spec.offset, spec.dim, layout="t2t", offset=spec.offset, dtype="float64")
    real = rows != 1
    assert_float32_sinusoids(ours[real], theirs[real], spec, rows[real])
    # the reference's float32 angles really are off at row 1025: posenc is not copying them
    assert np.abs(ours[-1] - theirs[-1]).max() > 1e-6


def test_whisper_config():
    positions = model("whisper-tiny")
    expected = meta("whisper-tiny")
    encoder, decoder = positions["encoder"], positions["decoder"]
    assert encoder.spec == posenc.SinusoidalSpec(expected["d_model"], layout="t2t")
    assert expected["tensors"]["model.encoder.embed_positions.weight"] == [1500, expected["d_model"]]
    assert expected["decoder_class"] == "WhisperPositionalEmbedding"
    assert decoder.spec.tensor in expected["tensors"]
    assert expected["tensors"][decoder.spec.tensor] == [decoder.spec.rows, decoder.spec.dim]


def test_whisper_encoder_sinusoids():
    spec = model("whisper-tiny")["encoder"].spec
    rows = meta("rows")["whisper_1500x384"]
    assert_float32_sinusoids(posenc.sinusoidal(rows, spec.dim, layout="t2t", dtype="float64"),
                             array("whisper/sinusoids_1500x384_rows"), spec, rows)
    tiny = array("whisper/tiny_encoder_table")  # what WhisperModel initialises its encoder table to
    assert_float32_sinusoids(posenc.sinusoidal(np.arange(16), 8, layout="t2t", dtype="float64"), tiny,
                             posenc.SinusoidalSpec(8, layout="t2t"), np.arange(16))


# --- learned tables -------------------------------------------------------------------------
LEARNED = {  # fixture -> layer type holding the learned table
    "gpt2": "default", "distilbert-base-uncased": "default", "gpt-neo-125m": "default", "starcoderbase-1b": "default", "opt-125m": "default", "bert-base-uncased": "default", "roberta-base": "default",
    "xlm-roberta-base": "default", "camembert-base": "default", "bart-large": "encoder", "mbart-large-50": "encoder", "whisper-tiny": "decoder",
}


@pytest.mark.parametrize("name", LEARNED)
def test_learned_tables_name_the_checkpoint_tensor(name):
    """The tensor posenc names exists in the model transformers builds, with offset + positions rows."""
    tensors = meta(name)["tensors"]
    for entry in model(name).of_kind("learned").values():
        assert tensors[entry.spec.tensor] == [entry.spec.rows, entry.spec.dim], entry.spec.tensor
        assert entry.apply == "add" and entry.layers == ()
        assert any("checkpoint" in note for note in entry.notes)
    learned_tensors = {e.spec.tensor for e in model(name).of_kind("learned").values()}
    stored_sinusoids = {"model.encoder.embed_positions.weight"} if name == "whisper-tiny" else set()
    assert learned_tensors == set(tensors) - stored_sinusoids  # every position tensor is accounted for


def rows_of(spec, weight, positions):
    """The rows a learned spec says positions read: weight[p + offset]."""
    return weight[np.asarray(positions) + spec.offset]


def test_opt_offset_and_padding():
    spec = posenc.from_hf_config({"model_type": "opt", "max_position_embeddings": 16, "hidden_size": 4}).get().spec
    weight = array("opt/weight")
    assert weight.shape == (spec.rows, spec.dim) and spec.offset == 2
    np.testing.assert_array_equal(array("opt/forward")[0], rows_of(spec, weight, np.arange(10)))
    padded = array("opt/forward_left_padded")[0]  # mask [0, 0, 1, 1, 1, 1]
    np.testing.assert_array_equal(padded[2:], rows_of(spec, weight, np.arange(4)))
    np.testing.assert_array_equal(padded[:2], weight[[1, 1]])  # padding reads row 1 (position -1)
    np.testing.assert_array_equal(array("opt/forward_cache6")[0], rows_of(spec, weight, np.arange(6, 10)))


def test_bart_offset():
    spec = posenc.from_hf_config({"model_type": "bart", "max_position_embeddings": 16, "d_model": 4})["decoder"].spec
    weight = array("bart/weight")
    assert weight.shape == (spec.rows, spec.dim)
    np.testing.assert_array_equal(array("bart/forward_cache3")[0], rows_of(spec, weight, np.arange(3, 8)))


def test_whisper_decoder_rows():
    spec = posenc.from_hf_config({"model_type": "whisper", "d_model": 8, "max_target_positions": 12})["decoder"].spec
    weight = array("whisper/decoder_weight")
    assert weight.shape == (spec.rows, spec.dim)
    np.testing.assert_array_equal(array("whisper/decoder_forward_cache3"), rows_of(spec, weight, np.arange(3, 7)))


def test_roberta_positions_start_after_padding_idx():
    spec = model("roberta-base").get().spec
    ids = array("roberta/position_ids")  # rows read by [[0, 5, 6, 7, 2], [1, 1, 0, 5, 2]] with pad id 1
    np.testing.assert_array_equal(ids[0], np.arange(5) + spec.offset)
    np.testing.assert_array_equal(ids[1], [1, 1, *(np.arange(3) + spec.offset)])
    assert spec.num_positions == 512 and spec.rows == 514
