"""Baichuan (remote code): RoPE in the 7B checkpoints, ALiBi in the 13B ones, told apart by shape.

The oracle is the remote modeling code's own arithmetic, restated: `_get_interleave(n)` builds
the slopes as Python floats (start * ratio ** i, recursing for non-powers of two), `torch.Tensor`
rounds them to float32, and the mask multiplies them by float32 key positions."""

import math

import numpy as np
import pytest

import posenc
from posenc.errors import PosencError
from posenc.tables import TableSpec
from conftest import hf_config


def interleave(n: int) -> list[float]:
    """Baichuan's `_get_interleave`: the ALiBi paper's slopes as Python floats."""
    if math.log2(n).is_integer():
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        return [start * start ** i for i in range(n)]
    power = 2 ** math.floor(math.log2(n))
    return interleave(power) + interleave(2 * power)[0::2][:n - power]


@pytest.mark.parametrize("heads", range(1, 257))
def test_slopes_are_the_remote_codes_float32_tensor(heads):
    ours = posenc.alibi_slopes(heads, variant="baichuan")
    np.testing.assert_array_equal(ours.astype(np.float32), np.array(interleave(heads), dtype=np.float32))
    assert (ours == ours.astype(np.float32)).all()  # already float32 values: products round once


@pytest.mark.parametrize("name", ["baichuan-13b-base", "baichuan2-13b-chat"])
def test_13b_configs_are_alibi_in_every_layer(name):
    model = posenc.from_hf_config(hf_config(name))
    entry = model.get()
    assert entry.spec == posenc.encodings.AlibiSpec(40, variant="baichuan")
    assert entry.layers == tuple(range(40)) and entry.apply == "bias"


def test_13b_mask_rows_equal_the_float32_product():
    """_gen_alibi_mask: slopes[h] * arange(max_pos) in float32, for every key position of the context."""
    spec = posenc.from_hf_config(hf_config("baichuan-13b-base")).get().spec
    table = TableSpec(spec, 0, 4096)
    rows = np.empty(table.shape, dtype=np.float32)
    table.fill(rows)
    slopes = np.array(interleave(40), dtype=np.float32)
    np.testing.assert_array_equal(rows, np.arange(4096, dtype=np.float32)[:, None] * slopes[None, :])


@pytest.mark.parametrize("name", ["baichuan-7b", "baichuan2-7b-base"])
def test_7b_configs_are_llama_rope(name):
    spec = posenc.from_hf_config(hf_config(name)).get().spec
    assert spec == posenc.from_hf_config({**hf_config("llama-3.1-8b"), "rope_scaling": None, "rope_theta": 10000.0,
                                          "max_position_embeddings": 4096}).get().spec


@pytest.mark.parametrize("change", [{"hidden_size": 5120, "num_hidden_layers": 32},
                                    {"hidden_size": 4096, "num_hidden_layers": 40},
                                    {"hidden_size": 2048, "num_hidden_layers": 24}])
def test_other_shapes_are_refused_not_guessed(change):
    with pytest.raises(PosencError) as err:
        posenc.from_hf_config({**hf_config("baichuan2-13b-chat"), **change})
    assert err.value.field == "config.hidden_size" and "will not guess" in err.value.message
