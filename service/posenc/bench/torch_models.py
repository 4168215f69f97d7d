"""Tiny random transformers models, one per RoPE family posenc.torch must make exact: each config
carries the family's real RoPE settings (the published checkpoints' values) at toy sizes, so the
tests and `posenc bench torch` build them locally, with nothing downloaded.

`logit_errors` is the measurement both use: the stock model and the patched one in float32,
each against a float64 "truth" (float64 weights, float64-formed exact angles).
"""

from __future__ import annotations

import copy

import numpy as np

TINY = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, vocab_size=96, pad_token_id=0, bos_token_id=1, eos_token_id=2)
_PHI3_LONG = [1.08, 1.1227, 1.3459, 1.6762, 2.1698, 2.7184, 3.4014, 4.2267]  # Phi-3-mini-128k, every 6th
_PHI3_SHORT = [1.0, 1.013, 1.0598, 1.1407, 1.2394, 1.3447, 3.0, 3.3]

#: name -> config: the family's RoPE as its published config.json has it.
CONFIGS = {
    "Llama-3.1 (llama3 scaling)": {
        "model_type": "llama", "max_position_embeddings": 131072, "rope_theta": 500000.0,
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 8192}},
    "Qwen2 (YaRN)": {
        "model_type": "qwen2", "max_position_embeddings": 131072, "rope_theta": 1000000.0,
        "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}},
    "Phi-3 (LongRoPE)": {
        "model_type": "phi3", "max_position_embeddings": 131072, "original_max_position_embeddings": 4096,
        "rope_theta": 10000.0, "head_dim": None,
        "rope_scaling": {"type": "longrope", "long_factor": _PHI3_LONG, "short_factor": _PHI3_SHORT}},
    "GPT-NeoX (partial rotary)": {
        "model_type": "gpt_neox", "max_position_embeddings": 2048, "rotary_emb_base": 10000, "rotary_pct": 0.25,
        "head_dim": None, "num_key_value_heads": None},
    "Gemma-3 (two layer types)": {
        "model_type": "gemma3_text", "num_hidden_layers": 3, "sliding_window": 8, "max_position_embeddings": 131072,
        "layer_types": ["sliding_attention", "sliding_attention", "full_attention"],
        "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                            "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0}}},
    "Cohere (interleaved)": {
        "model_type": "cohere", "max_position_embeddings": 131072, "rope_theta": 8000000.0, "head_dim": None,
        "logit_scale": 0.0625},
    "DeepSeek-V3 (YaRN, mscale)": {
        "model_type": "deepseek_v3", "max_position_embeddings": 163840, "rope_theta": 10000, "head_dim": None,
        "rope_scaling": {"type": "yarn", "factor": 40, "beta_fast": 32, "beta_slow": 1, "mscale": 1.0,
                         "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096},
        "num_key_value_heads": 4, "kv_lora_rank": 16, "q_lora_rank": 24, "qk_nope_head_dim": 8,
        "qk_rope_head_dim": 8, "v_head_dim": 8, "n_routed_experts": 4, "num_experts_per_tok": 2, "n_group": 2,
        "topk_group": 1, "n_shared_experts": 1, "moe_intermediate_size": 32,
        # every layer dense: torch's grouped MoE matmul has no float64, which the truth model needs
        "first_k_dense_replace": 2},
    "Llama-4 (complex freqs_cis)": {
        "model_type": "llama4_text", "max_position_embeddings": 10485760, "rope_theta": 500000.0,
        "rope_scaling": {"rope_type": "llama3", "factor": 16.0, "low_freq_factor": 1.0, "high_freq_factor": 1.0,
                         "original_max_position_embeddings": 8192},
        "intermediate_size_mlp": 96, "attention_chunk_size": 8192, "num_local_experts": 2,
        # layer 0 rotary, layer 1 NoPE (Scout: every fourth); every layer dense, as DeepSeek-V3's above
        "no_rope_layers": [1, 0], "moe_layers": []},
}


def config_dict(name: str) -> dict:
    """The config.json of the tiny model `name` (None values dropped: the family default applies)."""
    merged = {**TINY, **CONFIGS[name]}
    return {key: value for key, value in merged.items() if value is not None}


def build(name: str, seed: int = 0):
    """The tiny float32 model for CONFIGS[name], random weights from `seed`, in eval mode."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(**config_dict(name))
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(config).float().eval()


def logit_errors(model, starts=(0, 100_000), length: int = 16, seed: int = 0) -> dict[int, tuple[float, float]]:
    """{start: (stock error, patched error)}: max |logits - truth| at positions start..start+length-1,
    truth = the model in float64 with exact float64 angles (posenc.torch.patch_model on a float64 copy)."""
    import torch

    from ..torch import patch_model

    truth = copy.deepcopy(model).double()
    patch_model(truth)
    patched = copy.deepcopy(model)
    patch_model(patched)
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, model.config.vocab_size, (1, length), generator=generator)
    out = {}
    with torch.no_grad():
        for start in starts:
            position_ids = torch.arange(start, start + length)[None]
            exact = truth(ids, position_ids=position_ids).logits
            stock_err = (model(ids, position_ids=position_ids).logits.double() - exact).abs().max().item()
            patched_err = (patched(ids, position_ids=position_ids).logits.double() - exact).abs().max().item()
            out[start] = (float(np.float64(stock_err)), float(np.float64(patched_err)))
    return out
