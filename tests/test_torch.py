"""posenc.torch: exact cos/sin tensors, the drop-in rotary module and patch_model on tiny random
models of every RoPE family (built locally from configs in posenc.bench.torch_models)."""

import numpy as np
import pytest
import torch

import posenc
import posenc.torch as pt
from posenc.bench import torch_models
from posenc.torch.cache import CosSinCache

LLAMA = "Llama-3.1 (llama3 scaling)"


@pytest.fixture(scope="module")
def models():
    return {name: torch_models.build(name) for name in torch_models.CONFIGS}


def test_core_package_does_not_import_torch():
    import subprocess
    import sys

    code = "import posenc, sys; posenc.sinusoidal([1], 8); posenc.from_hf_config({'model_type': 'llama', " \
           "'hidden_size': 64, 'num_attention_heads': 4}); assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("arrangement", ["cat", "interleave"])
def test_cos_sin_is_posenc_cast_once_in_the_module_layout(dtype, arrangement):
    spec = posenc.RopeSpec(16, base=500000.0)
    positions = torch.tensor([[0, 7, 100000], [3, 4, 1000000]])
    cos, sin = pt.cos_sin(positions, spec, dtype=dtype, arrangement=arrangement)
    assert cos.shape == (2, 3, 16) and cos.dtype == dtype and sin.dtype == dtype
    want_cos, want_sin = posenc.rope_cos_sin(positions.reshape(-1).numpy(), spec,
                                             dtype=pt.tensors.posenc_dtype(dtype))
    half = (slice(None), slice(0, 8)) if arrangement == "cat" else (slice(None), slice(0, None, 2))
    for got, want in ((cos, want_cos), (sin, want_sin)):
        flat = got.reshape(6, 16)
        assert torch.equal(flat[half].float(), torch.from_numpy(want.astype(np.float32)))
        other = flat[:, 8:] if arrangement == "cat" else flat[:, 1::2]
        assert torch.equal(other, flat[half])


def test_bfloat16_is_one_rounding_of_the_float64_value():
    spec = posenc.RopeSpec(64)
    cos64, _ = pt.cos_sin(torch.arange(0, 300000, 997), spec, dtype=torch.float64)
    cos16, _ = pt.cos_sin(torch.arange(0, 300000, 997), spec, dtype=torch.bfloat16)
    via_float32 = cos64.float().to(torch.bfloat16)  # what a second rounding would give, where it differs
    import ml_dtypes

    single = torch.from_numpy(cos64.numpy().astype(ml_dtypes.bfloat16).view(np.uint16)).view(torch.bfloat16)
    assert torch.equal(cos16, single)
    assert via_float32.shape == cos16.shape


def test_patch_replaces_and_reports(models):
    model = torch_models.copy.deepcopy(models[LLAMA])
    report = pt.patch_model(model)
    assert [r.path for r in report.replaced] == ["model.rotary_emb"]
    assert isinstance(model.model.rotary_emb, pt.ExactRotaryEmbedding)
    assert "LlamaRotaryEmbedding" in str(report)
    with pytest.raises(posenc.PosencError, match="no \\*RotaryEmbedding"):
        pt.patch_model(model)  # nothing left to replace


@pytest.mark.parametrize("name", list(torch_models.CONFIGS))
def test_patched_model_is_closer_to_the_float64_truth(models, name):
    errors = torch_models.logit_errors(models[name], starts=(0, 100_000, 1_000_000))
    stock0, patched0 = errors[0]
    assert patched0 <= 2 * stock0 + 1e-7  # short positions: unchanged within float32 noise
    for start in (100_000, 1_000_000):
        stock, patched = errors[start]
        # better wherever the stock module has drifted past float32 noise (GPT-NeoX's partial rotary
        # keeps only low frequencies: at 100000 its stock error is still noise, 1.98e-7 vs 1.95e-7 at 0)
        assert patched < stock or stock <= 2 * stock0 + 1e-7, (start, errors)
        assert patched <= 2 * patched0 + 1e-7  # the exact model's error does not grow with position
    stock, patched = errors[1_000_000]
    assert stock >= 3 * patched, errors  # GPT-NeoX partial: 8.44e-7 vs 2.11e-7 on an AMD EPYC (AVX2)


def test_dynamic_ntk_follows_the_reference_module_state():
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    config = LlamaConfig(hidden_size=64, num_attention_heads=4, max_position_embeddings=64,
                         rope_scaling={"rope_type": "dynamic", "factor": 2.0}, rope_theta=10000.0)
    stock, exact = LlamaRotaryEmbedding(config), pt.ExactRotaryEmbedding(config.to_dict())
    x = torch.zeros(1, 1, 1, dtype=torch.float64)
    for length in (32, 200, 100, 40, 300):  # grows, keeps, resets below 64, grows again
        ids = torch.arange(length)[None]
        want_cos, _ = stock(x.float(), ids)
        got_cos, _ = exact(x, ids)
        assert got_cos.shape == want_cos.shape
        assert (got_cos - want_cos.double()).abs().max() < 5e-5, length


def test_longrope_picks_factors_per_call(models):
    phi = torch_models.copy.deepcopy(models["Phi-3 (LongRoPE)"])
    stock = phi.model.rotary_emb
    pt.patch_model(phi)
    exact = phi.model.rotary_emb
    x = torch.zeros(1, dtype=torch.float32)
    for ids in (torch.arange(8)[None], torch.arange(5000, 5008)[None], torch.arange(8)[None]):
        want, _ = stock(x, ids)
        got, _ = exact(x.double(), ids)
        assert (got - want.double()).abs().max() < 2e-3  # float32 angles at p ~ 5000


def test_refuses_alibi_models_and_points_at_the_bias():
    from transformers import BloomConfig, BloomForCausalLM

    model = BloomForCausalLM(BloomConfig(hidden_size=32, n_head=4, n_layer=1, vocab_size=64))
    with pytest.raises(posenc.PosencError) as info:
        pt.patch_model(model)
    assert "alibi_bias" in str(info.value)
    bias = pt.alibi_bias(4, 3, 5, k_offset=-2, variant="bloom", dtype=torch.bfloat16)
    assert bias.shape == (4, 3, 5) and bias.dtype == torch.bfloat16


def test_refuses_a_spec_that_does_not_reproduce_the_stock_module(models):
    model = torch_models.copy.deepcopy(models[LLAMA])
    stock = model.model.rotary_emb
    wrong = posenc.RopeSpec(16, base=10000.0)  # the model uses 500000 + llama3 scaling
    from posenc.torch.patch import _probe

    with pytest.raises(posenc.PosencError, match="do not reproduce"):
        _probe("model.rotary_emb", stock, pt.ExactRotaryEmbedding(wrong), "default", False)


def test_gemma3_layer_types_each_get_their_own_frequencies(models):
    model = torch_models.copy.deepcopy(models["Gemma-3 (two layer types)"])
    report = pt.patch_model(model)
    assert set(report.replaced[0].layer_types) == {"sliding_attention", "full_attention"}
    x = torch.zeros(1, dtype=torch.float64)
    ids = torch.tensor([[1000]])
    local, _ = model.model.rotary_emb(x, ids, "sliding_attention")
    full, _ = model.model.rotary_emb(x, ids, "full_attention")
    assert not torch.equal(local, full)


def test_table_backed_module_matches_the_computed_one(tmp_path, models):
    from posenc.encodings import RopeSpec
    from posenc.shm import TableStore
    from posenc.tables import TableSpec

    model = torch_models.copy.deepcopy(models[LLAMA])
    spec = pt.ExactRotaryEmbedding(model.config.to_dict()).specs["default"]
    assert isinstance(spec, RopeSpec)
    store = TableStore(tmp_path)
    try:
        store.publish("tiny-llama", TableSpec(spec, 0, 4096), progress=None)
        from_table = torch_models.copy.deepcopy(model)
        report = pt.patch_model(from_table, table="tiny-llama", shm_root=tmp_path)
        computed = torch_models.copy.deepcopy(model)
        computed_report = pt.patch_model(computed)
        # the report says where the rows come from (it read like a computed one before)
        assert report.replaced[0].tables == {"default": f"'tiny-llama' in {tmp_path} (float32, positions 0:4096)"}
        assert f"rows read from shared-memory table 'tiny-llama' in {tmp_path}" in str(report)
        assert not computed_report.replaced[0].tables and "rows computed by posenc" in str(computed_report)
        ids = torch.arange(16)[None]
        x = torch.zeros(1, dtype=torch.float32)
        a = from_table.model.rotary_emb(x, ids)
        b = computed.model.rotary_emb(x, ids)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
        with pytest.raises(posenc.PosencError, match="not this model"):
            pt.ExactRotaryEmbedding(posenc.RopeSpec(16), table="tiny-llama", shm_root=tmp_path)
    finally:
        store.close()


def test_a_table_not_in_the_directory_says_how_to_name_another(tmp_path, models, monkeypatch):
    """Before: "no table named 'tiny-llama' in /dev/shm", with no word of shm_root= or POSENC_SHM_DIR."""
    from posenc.shm import TableStore
    from posenc.tables import TableSpec

    model = torch_models.copy.deepcopy(models[LLAMA])
    spec = pt.ExactRotaryEmbedding(model.config.to_dict()).specs["default"]
    empty = tmp_path / "empty"
    with pytest.raises(posenc.PosencError) as err:
        pt.patch_model(model, table="tiny-llama", shm_root=empty)
    message = str(err.value)
    assert message.startswith(f"table: no table named 'tiny-llama' in {empty}")
    assert "shm_root=DIR" in message and "POSENC_SHM_DIR=DIR" in message and "Tables there" not in message
    store = TableStore(tmp_path / "shm")
    try:
        store.publish("tiny-llama", TableSpec(spec, 0, 64), progress=None)
        with pytest.raises(posenc.PosencError, match="Tables there: tiny-llama[.] A table published"):
            pt.patch_model(model, table="tiny", shm_root=tmp_path / "shm")
        monkeypatch.setenv("POSENC_SHM_DIR", str(tmp_path / "shm"))  # the remedy the message gives
        assert pt.patch_model(model, table="tiny-llama").replaced[0].tables
    finally:
        store.close()


def test_cache_is_bounded():
    cache = CosSinCache(max_bytes=3 * 2 * 1024 * 16 * 4)
    spec = posenc.RopeSpec(16)
    module = pt.ExactRotaryEmbedding(spec, cache=cache)
    x = torch.zeros(1, dtype=torch.float32)
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.float32):
        module(x.to(dtype), torch.arange(10)[None])
    assert cache.nbytes <= cache.max_bytes and len(cache) <= 3
    module(x, torch.arange(2_000_000, 2_000_010)[None])  # beyond max_rows: computed, not cached
    assert cache.nbytes <= cache.max_bytes


def test_a_model_cast_to_bfloat16_is_refused_naming_the_cast_inv_freq_and_the_remedy(models):
    """Before: only "max difference 0.0177"; the cause is .to(torch.bfloat16) casting the stock
    module's inv_freq buffer, and patching before the cast works."""
    model = torch_models.copy.deepcopy(models[LLAMA]).to(torch.bfloat16)
    assert model.model.rotary_emb.inv_freq.dtype == torch.bfloat16
    with pytest.raises(posenc.PosencError) as err:
        pt.patch_model(model)
    message = str(err.value)
    assert "inv_freq were cast to torch.bfloat16" in message and "patch_model before casting" in message
    # transformers 5 loads with dtype= (torch_dtype= is its deprecated name), and the module is named
    # where "layer type None" stood for a module serving one layer type
    assert "from_pretrained(..., dtype=torch.bfloat16)" in message
    assert "posenc's positions for 'model.rotary_emb' (layer type 'default')" in message
    assert "None" not in message
    assert isinstance(model.model.rotary_emb, type(models[LLAMA].model.rotary_emb))  # nothing changed
    patched = torch_models.copy.deepcopy(models[LLAMA])
    pt.patch_model(patched)
    patched.to(torch.bfloat16)  # the remedy the message gives
    ids = torch.arange(4)[None]
    cos, _ = patched.model.rotary_emb(torch.zeros(1, dtype=torch.bfloat16), ids)
    assert cos.dtype == torch.bfloat16 and cos.shape[-2] == 4


def test_llama4_complex_freqs_cis_is_replaced_by_an_exact_complex_tensor(models):
    """Llama-4's rotary module returns one complex freqs_cis (cos + i*sin, [batch, n, head_dim/2]), not a
    (cos, sin) pair: patch_model probes it as such and swaps in the COMPLEX arrangement (it crashed
    unpacking a pair before)."""
    model = torch_models.copy.deepcopy(models["Llama-4 (complex freqs_cis)"])
    stock = model.model.rotary_emb
    report = pt.patch_model(model)
    assert [(r.path, r.stock, r.arrangement) for r in report.replaced] == \
        [("model.rotary_emb", "Llama4TextRotaryEmbedding", "complex")]
    ids = torch.tensor([[0, 1, 2, 11, 4095]])
    # float32 angles whatever x is (complex64); a float64 model gets complex128 from posenc, which its
    # complex64 query promotes to: the float64 truth of bench/torch_models.logit_errors stays float64
    for dtype, complex_dtype in ((torch.float32, torch.complex64), (torch.bfloat16, torch.complex64),
                                 (torch.float64, torch.complex128)):
        x = torch.zeros(1, 1, 1, dtype=dtype)
        want, got = stock(x, ids), model.model.rotary_emb(x, ids)
        assert want.dtype == torch.complex64 and got.dtype == complex_dtype
        assert got.shape == want.shape == (1, 5, 8)
        assert (got - want).abs().max() < 2e-3  # float32 angles at 4095 are off by ~4e-4
    spec = posenc.from_hf_config(model.config)["default"].spec
    cos, sin = posenc.rope_cos_sin([4095], spec, arrangement="freq", dtype="float32")
    got = model.model.rotary_emb(torch.zeros(1, 1, 1), torch.tensor([[4095]]))
    assert np.array_equal(got.real.numpy()[0], cos) and np.array_equal(got.imag.numpy()[0], sin)
