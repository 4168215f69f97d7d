"""Models whose layers or stacks apply several rotations (issue 23): DeepSeek-V3.2 / AXK-2's
sparse-attention indexer, T5Gemma / T5Gemma-2 and Moonshine's two rotating stacks. The values
are checked layer by layer against transformers by test_models_truth.py; these tests pin what
the readers decide from which key, their refusals, and that the judge catches a mix-up."""

import model_truth
import pytest

import posenc
from posenc import PosencError
from posenc.models.positions import LayerPositions, ModelPositions


def error_field(config) -> str:
    with pytest.raises(PosencError) as info:
        posenc.from_hf_config(config)
    return info.value.field


def test_deepseek_v32_attention_and_indexer():
    yarn = {"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
            "mscale": 1.0, "mscale_all_dim": 1.0, "beta_fast": 32, "beta_slow": 1}
    model = posenc.from_hf_config({"model_type": "deepseek_v32", "rope_parameters": yarn})
    attention, indexer = model["default"], model["indexer"]
    assert (attention.apply, indexer.apply) == ("interleaved", "half")
    assert attention.layers == indexer.layers == tuple(range(61))
    assert attention.spec.head_dim == indexer.spec.head_dim == 64
    assert attention.spec.scaling == indexer.spec.scaling and attention.spec.rope_type == "yarn"
    assert "index_head_dim" in indexer.notes[0] and "64 of the 128" in indexer.notes[0]
    assert posenc.from_hf_config({"model_type": "axk2"})["indexer"].spec.head_dim == 32


def test_deepseek_v32_indexer_narrower_than_the_rope_part_is_refused():
    assert error_field({"model_type": "deepseek_v32", "index_head_dim": 32}) == "config.index_head_dim"


def test_t5gemma_reads_each_stack_from_its_own_config():
    config = {"model_type": "t5gemma",
              "encoder": {"num_hidden_layers": 4, "head_dim": 64, "rope_parameters": {"rope_type": "default",
                                                                                       "rope_theta": 50000.0}},
              "decoder": {"num_hidden_layers": 2, "head_dim": 64, "rope_parameters": {
                  "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024, "rope_theta": 1e4}}}
    model = posenc.from_hf_config(config)
    assert model.layer_types == ("encoder", "decoder")
    assert (model["encoder"].spec.base, model["encoder"].layers) == (50000.0, (0, 1, 2, 3))
    assert (model["decoder"].spec.rope_type, model["decoder"].layers) == ("yarn", (0, 1))
    bare = posenc.from_hf_config({"model_type": "t5gemma"})  # absent stacks: T5GemmaModuleConfig's defaults
    assert bare["decoder"].spec.head_dim == 256 and len(bare["encoder"].layers) == 26
    assert error_field({"model_type": "t5gemma", "encoder": 3}) == "config.encoder"


def test_t5gemma2_stacks_per_layer_type():
    model = posenc.from_hf_config({"model_type": "t5gemma2"})
    assert set(model.layer_types) == {"encoder sliding_attention", "encoder full_attention",
                                      "decoder sliding_attention", "decoder full_attention"}
    assert model["encoder full_attention"].layers == (5, 11, 17, 23)
    assert (model["decoder full_attention"].spec.base, model["decoder sliding_attention"].spec.base) == (1e6, 1e4)


def test_moonshine_two_stacks_one_config():
    model = posenc.from_hf_config({"model_type": "moonshine", "encoder_num_hidden_layers": 4})
    encoder, decoder = model["encoder"], model["decoder"]
    assert (encoder.layers, decoder.layers) == ((0, 1, 2, 3), tuple(range(6)))
    assert encoder.apply == decoder.apply == "interleaved"
    assert (decoder.spec.head_dim, decoder.spec.partial_rotary_factor, decoder.spec.rotary_dim) == (36, 0.9, 32)
    assert error_field({"model_type": "moonshine", "encoder_num_attention_heads": 4}) == \
        "config.decoder_num_attention_heads"


def test_moonshine_streaming_decoder_and_encoder_states_table():
    model = posenc.from_hf_config({"model_type": "moonshine_streaming", "encoder_config": {"hidden_size": 256}})
    assert (model["decoder"].spec.partial_rotary_factor, model["decoder"].apply) == (0.8, "interleaved")
    table = model["encoder_states"]
    assert (table.apply, table.layers, table.spec.dim, table.spec.num_positions) == ("add", (), 256, 4096)
    # its config class ignores these without rope_parameters: only the default's own value is accepted
    assert error_field({"model_type": "moonshine_streaming", "rope_theta": 5e5}) == "config.rope_theta"
    posenc.from_hf_config({"model_type": "moonshine_streaming", "rope_theta": 10000.0})


def _case(model_type, variation="default"):
    return next(c for c in model_truth.load()[1] if c.model_type == model_type and c.variation == variation)


def _rebuilt(model, entries):
    return ModelPositions(model.model_type, model.reader, {e.layer_type: e for e in entries})


def _swapped(real, first: str, second: str):
    """A from_hf_config whose two named layer types trade their spec and layout (each keeps its layers)."""
    def read(config, **kwargs):
        model = real(config)
        a, b = model[first], model[second]
        return _rebuilt(model, [LayerPositions(first, b.spec, a.layers, b.apply),
                                LayerPositions(second, a.spec, b.layers, a.apply)])
    return read


def test_judge_needs_the_indexer_and_pairs_it_by_name(monkeypatch):
    case = _case("deepseek_v32", "rope_type=yarn")
    assert case.parts and model_truth.judge(case).status == "exact"
    real = posenc.from_hf_config
    monkeypatch.setattr(posenc, "from_hf_config", lambda c, **k: _rebuilt(real(c), [real(c)["default"]]))
    assert model_truth.judge(case).status == "wrong"
    monkeypatch.setattr(posenc, "from_hf_config", _swapped(real, "default", "indexer"))
    assert "indexer" in model_truth.judge(case).detail


def test_judge_scores_each_stack_against_its_own_layer_types(monkeypatch):
    case = _case("t5gemma", "yarn on encoder")
    assert model_truth.judge(case).status == "exact"
    real = posenc.from_hf_config
    monkeypatch.setattr(posenc, "from_hf_config", _swapped(real, "encoder", "decoder"))
    assert model_truth.judge(case).status == "wrong"
    monkeypatch.setattr(posenc, "from_hf_config", lambda c, **k: _rebuilt(
        real(c), [LayerPositions("default", real(c)["encoder"].spec, tuple(range(8)), "half")]))
    assert "names none of the rotating stacks" in model_truth.judge(case).detail
