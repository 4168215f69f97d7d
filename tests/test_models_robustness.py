"""Every key a non-RoPE / M-RoPE family reader reads, set to every kind of JSON value, gives
either a ModelPositions or a PosencError naming a config field: never a TypeError, KeyError,
ZeroDivisionError or a silent crash."""

import json
import math

import pytest

import posenc
from conftest import hf_config

#: fixture -> the keys its reader reads (dotted for nested objects), present in the fixture or not.
READ_KEYS = {
    "bloom-560m": ["n_head", "num_attention_heads", "n_layer", "num_hidden_layers", "offset_alibi"],
    "mpt-7b": ["n_heads", "num_attention_heads", "n_layers", "num_hidden_layers", "attn_config",
               "attn_config.alibi", "attn_config.alibi_bias_max", "attn_config.rope"],
    "t5-small": ["relative_attention_num_buckets", "relative_attention_max_distance", "num_layers",
                 "num_hidden_layers", "num_decoder_layers"],
    "umt5-small": ["relative_attention_num_buckets", "relative_attention_max_distance", "num_layers",
                   "num_decoder_layers"],
    "bart-large": ["d_model", "hidden_size", "max_position_embeddings"],
    "opus-mt-en-de": ["d_model", "hidden_size"],
    "m2m100-418m": ["d_model", "pad_token_id"],
    "xglm-564m": ["d_model", "hidden_size", "pad_token_id"],
    "whisper-tiny": ["d_model", "max_source_positions", "max_target_positions"],
    "gpt2": ["n_positions", "max_position_embeddings", "n_embd", "hidden_size"],
    "gpt-neo-125m": ["max_position_embeddings", "hidden_size"],
    "starcoderbase-1b": ["n_positions", "max_position_embeddings", "n_embd", "hidden_size"],
    "pegasus-xsum": ["d_model", "hidden_size"],
    "opt-125m": ["max_position_embeddings", "hidden_size"],
    "bert-base-uncased": ["max_position_embeddings", "hidden_size", "position_embedding_type"],
    "distilbert-base-uncased": ["max_position_embeddings", "dim", "hidden_size", "sinusoidal_pos_embds"],
    "roberta-base": ["max_position_embeddings", "hidden_size", "pad_token_id", "position_embedding_type"],
    "qwen2-vl-7b-instruct": ["hidden_size", "num_attention_heads", "head_dim", "num_hidden_layers",
                             "max_position_embeddings", "rope_theta", "rope_scaling", "rope_scaling.type",
                             "rope_scaling.mrope_section", "rope_parameters", "text_config"],
    "qwen2.5-vl-3b-v5": ["text_config", "text_config.hidden_size", "text_config.num_attention_heads",
                         "text_config.rope_parameters", "text_config.rope_parameters.mrope_section",
                         "text_config.rope_parameters.rope_theta", "text_config.rope_parameters.rope_type",
                         "text_config.num_hidden_layers"],
}
VALUES = [None, True, False, 0, -1, 1, 3, 2**63, 10**400, 0.5, -0.0, 1e308, math.inf, math.nan, "", "x", "absolute", [],
          [1, 2], [16, 24, 24], {}, {"a": 1}]


def with_value(config: dict, dotted: str, value) -> dict:
    """A copy of config with the dotted key set (creating nested objects on the way)."""
    out = dict(config)
    node, *rest = dotted.split(".")
    if rest:
        inner = out.get(node)
        out[node] = with_value(inner if isinstance(inner, dict) else {}, ".".join(rest), value)
    else:
        out[node] = value
    return out


def read(config):
    try:
        return posenc.from_hf_config(config)
    except posenc.PosencError as exc:
        assert exc.field.startswith("config"), exc.field
        assert str(exc).startswith(exc.field)
        return exc


@pytest.mark.parametrize("name", READ_KEYS)
def test_any_json_value_is_a_result_or_a_named_error(name):
    base = hf_config(name)
    assert isinstance(read(base), posenc.ModelPositions)
    for key in READ_KEYS[name]:
        for value in VALUES:
            result = read(with_value(base, key, value))
            if isinstance(result, posenc.ModelPositions):
                json.dumps(result.to_dict(), allow_nan=False)  # the summary POST /v1/models/positions returns
                for entry in result.encodings.values():  # what was accepted is a valid, serialisable spec
                    assert type(entry.spec).from_dict(entry.spec.to_dict()) == entry.spec


@pytest.mark.parametrize("config, field", [
    ({"model_type": "bloom", "n_head": "16"}, "config.n_head"),
    ({"model_type": "bloom", "num_attention_heads": 0}, "config.num_attention_heads"),
    ({"model_type": "bloom", "n_layer": 10**9}, "config.n_layer"),
    ({"model_type": "mpt", "attn_config": []}, "config.attn_config"),
    ({"model_type": "mpt", "attn_config": {"alibi": False}}, "config.attn_config.alibi"),
    ({"model_type": "mpt", "attn_config": {"alibi": "true"}}, "config.attn_config.alibi"),
    ({"model_type": "mpt", "attn_config": {"alibi_bias_max": 0}}, "config.attn_config.alibi_bias_max"),
    ({"model_type": "mpt", "attn_config": {"rope": True}}, "config.attn_config.rope"),
    ({"model_type": "t5", "relative_attention_num_buckets": 2}, "config.relative_attention_num_buckets"),
    ({"model_type": "t5", "relative_attention_max_distance": 8}, "config.relative_attention_max_distance"),
    ({"model_type": "umt5", "num_decoder_layers": 0}, "config.num_decoder_layers"),
    ({"model_type": "bart", "d_model": 1.5}, "config.d_model"),
    ({"model_type": "marian", "d_model": 0}, "config.d_model"),
    ({"model_type": "m2m_100", "d_model": 2}, "config.d_model"),
    ({"model_type": "m2m_100", "pad_token_id": None}, "config.pad_token_id"),
    ({"model_type": "m2m_100", "pad_token_id": -1}, "config.pad_token_id"),
    ({"model_type": "whisper", "d_model": 383}, "config.d_model"),
    ({"model_type": "whisper", "max_target_positions": 0}, "config.max_target_positions"),
    ({"model_type": "gpt2", "n_positions": [1024]}, "config.n_positions"),
    ({"model_type": "opt", "hidden_size": {}}, "config.hidden_size"),
    ({"model_type": "bert", "position_embedding_type": "relative_key"}, "config.position_embedding_type"),
    ({"model_type": "bert", "position_embedding_type": 3}, "config.position_embedding_type"),
    ({"model_type": "roberta", "pad_token_id": None}, "config.pad_token_id"),
    ({"model_type": "roberta", "max_position_embeddings": 2}, "config.max_position_embeddings"),
    ({"model_type": "xlm-roberta", "position_embedding_type": "relative_key_query"}, "config.position_embedding_type"),
])
def test_bad_values_name_their_field(config, field):
    with pytest.raises(posenc.PosencError) as info:
        posenc.from_hf_config(config)
    assert info.value.field == field
