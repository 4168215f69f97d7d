"""GGUF files written the way llama.cpp's convert_hf_to_gguf.py writes them (for tests/test_audit_gguf.py and
tests/test_http_audit.py): for a raw HF config.json, the keys each converter class's `set_gguf_parameters`
writes (same names, same GGUF types: the `gguf` package's GGUFWriter is the converter's own writer) and
the tensors its `generate_extra_tensors` yields, with their arithmetic (Llama-3's divisors in torch
float32). Vocabulary and weights are left out; `pad` adds a stand-in weight tensor after the RoPE ones.

Read from ggml-org/llama.cpp 0c1e57098 (conversion/base.py TextModel, llama.py LlamaModel, qwen.py,
phi.py Phi3MiniModel, deepseek.py DeepseekV2Model, gemma.py Gemma2Model / Gemma3Model, falcon.py,
gptneox.py, mistral3.py, command_r.py). `changes` then make one mistake: a key name (without the
"{arch}." prefix) or a tensor name (without ".weight") set to a new value, or None to leave it out.
"""

from __future__ import annotations

import math

import gguf
import numpy as np
import torch

F16 = 1  # gguf.LlamaFileType.MOSTLY_F16: the file type the converter records for --outtype f16


class Keys(dict):
    """The key/values one class writes, in order (a later write of a key replaces it, as GGUFWriter warns and does),
    each with its GGUF type."""

    def put(self, name: str, value, kind: gguf.GGUFValueType | None = None):
        if value is not None:
            self[name] = (value, kind or _kind(value))


def _kind(value) -> gguf.GGUFValueType:
    if isinstance(value, bool):
        return gguf.GGUFValueType.BOOL
    if isinstance(value, int):
        return gguf.GGUFValueType.UINT32
    if isinstance(value, float):
        return gguf.GGUFValueType.FLOAT32
    return gguf.GGUFValueType.STRING


def find(hparams: dict, *names, default=None):
    return next((hparams[n] for n in names if n in hparams), default)


def rope_parameters(hparams: dict) -> dict:
    """TextModel.__init__: rope_parameters (or rope_scaling), with the top-level rope keys mirrored in."""
    params = dict(hparams.get("rope_parameters", hparams.get("rope_scaling")) or {})
    if "full_attention" not in params and "sliding_attention" not in params:
        local = find(hparams, "local_rope_theta", "rope_local_theta", "rope_theta_local", "swa_rope_theta",
                     "rope_local_base_freq")
        if local is not None:
            params["sliding_attention"] = {"rope_theta": local}
        mirrored = {"rope_theta": find(hparams, "global_rope_theta", "rope_global_theta", "rope_theta_global",
                                       "rope_theta", "rotary_emb_base"),
                    "rope_type": params.get("type"),
                    "partial_rotary_factor": find(hparams, "partial_rotary_factor", "rope_pct", "rope_percent"),
                    "original_max_position_embeddings": hparams.get("original_max_position_embeddings")}
        params.update({k: v for k, v in mirrored.items() if k not in params and v is not None})
    return params


def text_model(hparams: dict, rope: dict, keys: Keys) -> None:
    """TextModel.set_gguf_parameters (the keys every class that calls super() writes)."""
    keys.put("block_count", find(hparams, "n_layers", "num_hidden_layers", "n_layer", "num_layers"))
    keys.put("context_length", find(hparams, "max_position_embeddings", "n_ctx", "n_positions", "max_length",
                                    "max_sequence_length", "model_max_length"))
    keys.put("embedding_length", find(hparams, "hidden_size", "n_embd", "dim"))
    keys.put("feed_forward_length", find(hparams, "prefix_dense_intermediate_size", "dense_intermediate_size",
                                         "intermediate_size", "n_inner", "hidden_dim"))
    keys.put("attention.head_count", find(hparams, "num_attention_heads", "n_head", "n_heads"))
    keys.put("attention.head_count_kv", find(hparams, "num_key_value_heads", "n_kv_heads"))
    if hparams.get("is_causal") is False:
        keys.put("attention.causal", False)
    params = rope.get("full_attention", rope)
    kind, factor = params.get("rope_type"), params.get("factor")
    if kind == "linear" and factor is not None:
        keys.put("rope.scaling.type", "linear")
        keys.put("rope.scaling.factor", float(factor))
    elif kind == "yarn" and factor is not None:
        keys.put("rope.scaling.type", "yarn")
        keys.put("rope.scaling.factor", float(factor))
        keys.put("rope.scaling.original_context_length", params["original_max_position_embeddings"])
        for key, name in (("yarn_ext_factor", "extrapolation_factor"), ("yarn_beta_fast", "beta_fast"),
                          ("yarn_beta_slow", "beta_slow")):
            value = params.get(name)
            keys.put(f"rope.scaling.{key}", None if value is None else float(value))
        attention = params.get("attention_factor", params.get("attn_factor"))
        keys.put("rope.scaling.yarn_attn_factor", None if attention is None else float(attention))
    elif kind in ("su", "longrope"):
        keys.put("rope.scaling.type", "longrope")
    if params.get("rope_theta") is not None:
        keys.put("rope.freq_base", float(params["rope_theta"]))
    local = rope.get("sliding_attention", {}).get("rope_theta")
    keys.put("rope.freq_base_swa", None if local is None else float(local))
    eps = find(hparams, "rms_norm_eps", "norm_eps")
    keys.put("attention.layer_norm_rms_epsilon", None if eps is None else float(eps))
    eps = find(hparams, "layer_norm_eps", "layer_norm_epsilon", "norm_epsilon")
    keys.put("attention.layer_norm_epsilon", None if eps is None else float(eps))
    keys.put("expert_count", find(hparams, "num_local_experts", "num_experts", "n_routed_experts"))
    keys.put("expert_used_count", find(hparams, "num_experts_per_tok", "num_experts_per_token", "top_k_experts"))
    keys.put("expert_group_count", hparams.get("n_group"))
    keys.put("expert_group_used_count", hparams.get("topk_group"))
    if hparams.get("head_dim") is not None:
        keys.put("attention.key_length", hparams["head_dim"])
        keys.put("attention.value_length", hparams["head_dim"])
    keys.put("general.file_type", F16)


def llama3_rope_freqs(rope: dict, hparams: dict) -> np.ndarray:
    """LlamaModel.generate_extra_tensors: Llama-3's divisors, in the converter's torch float32 arithmetic."""
    base = rope.get("rope_theta", 10000.0)
    dim = hparams.get("head_dim") or hparams["hidden_size"] // hparams["num_attention_heads"]
    freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    factor = rope.get("factor", 8.0)
    low, high = rope.get("low_freq_factor", 1.0), rope.get("high_freq_factor", 4.0)
    old = rope.get("original_max_position_embeddings", 8192)
    out = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < old / high:
            out.append(1)
        elif wavelen > old / low:
            out.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return torch.tensor(out, dtype=torch.float32).numpy()


def llama(hparams: dict, rope: dict, keys: Keys, tensors: dict) -> None:
    """LlamaModel (llama, and Mistral / Mixtral / Llava / Voxtral ... under it)."""
    text_model(hparams, rope, keys)
    keys.put("vocab_size", hparams.get("vocab_size"))
    keys.put("rope.dimension_count", hparams.get("head_dim") or hparams["hidden_size"] // hparams["num_attention_heads"])
    params = rope.get("full_attention", rope)
    if str(params.get("rope_type", "")).lower() == "llama3":
        tensors["rope_freqs"] = llama3_rope_freqs(params, hparams)


def text_only(hparams: dict, rope: dict, keys: Keys, tensors: dict) -> None:
    """Qwen2Model, Qwen3Model, Qwen2MoeModel, Olmo2Model (without sliding_window) ...: TextModel's keys and
    nothing else about RoPE."""
    text_model(hparams, rope, keys)


def command_r(hparams: dict, rope: dict, keys: Keys, tensors: dict) -> None:
    """CommandR2Model: the context is model_max_length when given, and the scaling type written as none."""
    text_model({**hparams, "max_position_embeddings": find(hparams, "model_max_length", "max_position_embeddings")},
               rope, keys)
    keys.put("logit_scale", float(hparams["logit_scale"]))
    keys.put("rope.scaling.type", "none")


def baichuan(hparams: dict, rope: dict, keys: Keys, tensors: dict) -> None:
    """BaichuanModel (its q/k reordered by _reverse_hf_permute, like LlamaModel.permute)."""
    text_model(hparams, rope, keys)
    keys.put("tensor_data_layout", "Meta AI original pth")
    keys.put("rope.dimension_count", hparams["hidden_size"] // hparams["num_attention_heads"])


def stablelm(hparams: dict, rope: dict, keys: Keys, tensors: dict) -> None:
    """StableLMModel: its own keys, partial rotary as rope.dimension_count, no rope.freq_base."""
    keys.put("context_length", hparams["max_position_embeddings"])
    keys.put("embedding_length", hparams["hidden_size"])
    keys.put("block_count", hparams["num_hidden_layers"])
    keys.put("feed_forward_length", hparams["intermediate_size"])
    keys.put("rope.dimension_count",
             int(rope["partial_rotary_factor"] * (hparams["hidden_size"] // hparams["num_attention_heads"])))
    keys.put("attention.head_count", hparams["num_attention_heads"])
    keys.put("attention.head_count_kv", hparams["num_key_value_heads"])
    keys.put("use_parallel_residual", hparams.get("use_parallel_residual", True))
    keys.put("attention.layer_norm_epsilon", float(find(hparams, "layer_norm_eps", "norm_eps")))
    keys.put("general.file_type", F16)


def gemma(hparams: dict, rope: dict, keys: Keys, tensors: dict) -> None:
    """GemmaModel: its own keys, no rope.freq_base (llama.cpp's 10000)."""
    keys.put("context_length", hparams["max_position_embeddings"])
    keys.put("embedding_length", hparams["hidden_size"])
    keys.put("block_count", hparams["num_hidden_layers"])
    keys.put("feed_forward_length", hparams["intermediate_size"])
    keys.put("attention.head_count", hparams["num_attention_heads"])
    keys.put("attention.head_count_kv", hparams.get("num_key_value_heads", hparams["num_attention_heads"]))
    keys.put("attention.layer_norm_rms_epsilon", float(hparams["rms_norm_eps"]))
    keys.put("attention.key_length", hparams["head_dim"])
    keys.put("attention.value_length", hparams["head_dim"])
    keys.put("general.file_type", F16)


def ministral3(hparams: dict, rope: dict, keys: Keys, tensors: dict) -> None:
    """Mistral3Model.Ministral3Model (a LlamaModel): YaRN's mscale_all_dim as written, not x0.1."""
    llama(hparams, rope, keys, tensors)
    keys.put("rope.scaling.yarn_log_multiplier", float(rope["mscale_all_dim"]))
    keys.put("attention.temperature_scale", float(rope["llama_4_scaling_beta"]))


def phi3(hparams: dict, rope: dict, keys: Keys, tensors: dict) -> None:
    """Phi3MiniModel: its own keys (no TextModel call, so no rope.scaling.type) and LongRoPE's factor tensors."""
    n_embd, n_head = hparams["hidden_size"], hparams["num_attention_heads"]
    context, original = hparams["max_position_embeddings"], rope["original_max_position_embeddings"]
    rope_dims = int(rope.get("partial_rotary_factor", 1.0) * n_embd) // n_head
    keys.put("context_length", context)
    keys.put("rope.scaling.original_context_length", original)
    keys.put("embedding_length", n_embd)
    keys.put("feed_forward_length", hparams["intermediate_size"])
    keys.put("block_count", hparams["num_hidden_layers"])
    keys.put("attention.head_count", n_head)
    keys.put("attention.head_count_kv", hparams.get("num_key_value_heads", n_head))
    keys.put("attention.layer_norm_rms_epsilon", float(hparams.get("rms_norm_eps", 1e-5)))
    keys.put("rope.dimension_count", rope_dims)
    keys.put("rope.freq_base", float(rope.get("full_attention", rope)["rope_theta"]))
    keys.put("general.file_type", F16)
    keys.put("attention.sliding_window", hparams.get("sliding_window") or 0)
    if rope.get("long_factor") is None:
        return
    scale = context / original
    kind = rope.get("rope_type", "").lower()
    if kind in ("su", "longrope"):
        attn = math.sqrt(1 + math.log(scale) / math.log(original)) if scale > 1.0 else 1.0
    else:  # yarn
        attn = 0.1 * math.log(scale) + 1.0 if scale > 1.0 else 1.0
    keys.put("rope.scaling.attn_factor", attn)
    tensors["rope_factors_long"] = np.asarray(rope["long_factor"], np.float32)
    tensors["rope_factors_short"] = np.asarray(rope["short_factor"], np.float32)


def phimoe(hparams: dict, rope: dict, keys: Keys, tensors: dict) -> None:
    """PhiMoeModel: Phi3MiniModel's keys and tensors, and the expert counts."""
    phi3(hparams, rope, keys, tensors)
    keys.put("expert_used_count", find(hparams, "num_experts_per_tok", "num_experts_per_token"))
    keys.put("expert_count", find(hparams, "num_local_experts", "num_experts"))


def deepseek2(hparams: dict, rope: dict, keys: Keys, tensors: dict) -> None:
    """DeepseekV2Model: MLA as MQA, the rotary dim qk_rope_head_dim, and 0.1 * mscale_all_dim
    ([TAG_DEEPSEEK2_YARN_LOG_MUL_FIX])."""
    hparams = {**hparams, "num_key_value_heads": 1, "rms_norm_eps": hparams.get("rms_norm_eps", 1e-6)}
    text_model(hparams, rope, keys)
    moe = hparams.get("n_routed_experts") is not None
    first_dense = hparams.get("first_k_dense_replace")
    keys.put("leading_dense_block_count", (0 if moe else hparams["num_hidden_layers"]) if first_dense is None
             else first_dense)
    kv_lora = hparams.get("kv_lora_rank", 512)
    keys.put("vocab_size", hparams["vocab_size"])
    keys.put("attention.q_lora_rank", hparams.get("q_lora_rank"))
    keys.put("attention.kv_lora_rank", kv_lora)
    keys.put("attention.key_length", kv_lora + hparams["qk_rope_head_dim"])
    keys.put("attention.value_length", kv_lora)
    keys.put("attention.key_length_mla", hparams["qk_nope_head_dim"] + hparams["qk_rope_head_dim"])
    keys.put("attention.value_length_mla", hparams["v_head_dim"])
    keys.put("expert_feed_forward_length", find(hparams, "moe_intermediate_size", "intermediate_size"))
    keys.put("expert_count", hparams.get("n_routed_experts"))
    keys.put("expert_shared_count", hparams.get("n_shared_experts", 0))
    keys.put("rope.dimension_count", hparams["qk_rope_head_dim"])
    if rope.get("mscale_all_dim") is not None:
        keys.put("rope.scaling.yarn_log_multiplier", 0.1 * rope["mscale_all_dim"])


def gemma2(hparams: dict, rope: dict, keys: Keys, tensors: dict) -> None:
    """Gemma2Model: its own keys (no TextModel call: no rope.freq_base, llama.cpp's default 10000)."""
    keys.put("context_length", hparams["max_position_embeddings"])
    keys.put("embedding_length", hparams["hidden_size"])
    keys.put("block_count", hparams["num_hidden_layers"])
    keys.put("feed_forward_length", hparams["intermediate_size"])
    keys.put("attention.head_count", hparams["num_attention_heads"])
    keys.put("attention.head_count_kv", hparams.get("num_key_value_heads", hparams["num_attention_heads"]))
    keys.put("attention.layer_norm_rms_epsilon", float(hparams.get("rms_norm_eps", 1e-6)))
    keys.put("attention.key_length", hparams["head_dim"])
    keys.put("attention.value_length", hparams["head_dim"])
    keys.put("general.file_type", F16)
    keys.put("attn_logit_softcapping", float(hparams["attn_logit_softcapping"]))
    keys.put("final_logit_softcapping", float(hparams["final_logit_softcapping"]))
    keys.put("attention.sliding_window", hparams["sliding_window"])


def gemma3(hparams: dict, rope: dict, keys: Keys, tensors: dict) -> None:
    """Gemma3Model: TextModel's keys (the scaling of the full layers, rope.freq_base_swa for the local ones),
    then its own defaults over them."""
    text_model(hparams, rope, keys)
    keys.put("context_length", hparams.get("max_position_embeddings", 131072))
    keys.put("attention.head_count", hparams.get("num_attention_heads", 8))
    keys.put("attention.layer_norm_rms_epsilon", float(hparams.get("rms_norm_eps", 1e-6)))
    keys.put("attention.key_length", hparams.get("head_dim", 256))
    keys.put("attention.value_length", hparams.get("head_dim", 256))
    keys.put("rope.freq_base", float(rope.get("full_attention", rope).get("rope_theta", 1_000_000.0)))
    if hparams.get("sliding_window_pattern") != 1:
        keys.put("attention.sliding_window", hparams["sliding_window"])
    keys.put("attention.head_count_kv", hparams.get("num_key_value_heads", 4))


def falcon(hparams: dict, rope: dict, keys: Keys, tensors: dict) -> None:
    """FalconModel: a context length of 2048 ("not in config.json") and no RoPE key at all."""
    keys.put("context_length", 2048)
    keys.put("tensor_data_layout", "jploski")
    keys.put("embedding_length", hparams["hidden_size"])
    keys.put("feed_forward_length", 4 * hparams["hidden_size"])
    keys.put("block_count", hparams["num_hidden_layers"])
    keys.put("attention.head_count", find(hparams, "num_attention_heads", "n_head"))
    keys.put("attention.head_count_kv", find(hparams, "num_kv_heads", "n_head_kv", default=1))
    keys.put("attention.layer_norm_epsilon", float(hparams["layer_norm_epsilon"]))
    keys.put("general.file_type", F16)


def gptneox(hparams: dict, rope: dict, keys: Keys, tensors: dict) -> None:
    """GPTNeoXModel: partial rotary as rope.dimension_count, no rope.freq_base (rotary_emb_base not written)."""
    keys.put("context_length", hparams["max_position_embeddings"])
    keys.put("embedding_length", hparams["hidden_size"])
    keys.put("block_count", hparams["num_hidden_layers"])
    keys.put("feed_forward_length", hparams["intermediate_size"])
    keys.put("rope.dimension_count",
             int(hparams["rotary_pct"] * (hparams["hidden_size"] // hparams["num_attention_heads"])))
    keys.put("attention.head_count", hparams["num_attention_heads"])
    keys.put("use_parallel_residual", hparams.get("use_parallel_residual", True))
    keys.put("attention.layer_norm_epsilon", float(hparams.get("layer_norm_eps", 1e-5)))  # the fixture omits it


#: HF architecture -> (GGUF arch, the class's key writer), as convert_hf_to_gguf.py registers them.
CLASSES = {
    "LlamaForCausalLM": ("llama", llama), "MistralForCausalLM": ("llama", llama),
    "MixtralForCausalLM": ("llama", llama), "Qwen2ForCausalLM": ("qwen2", text_only),
    "Qwen3ForCausalLM": ("qwen3", text_only), "CohereForCausalLM": ("command-r", command_r),
    "Qwen2MoeForCausalLM": ("qwen2moe", text_only), "Qwen3MoeForCausalLM": ("qwen3moe", text_only),
    "Olmo2ForCausalLM": ("olmo2", text_only), "BaichuanForCausalLM": ("baichuan", baichuan),
    "StableLmForCausalLM": ("stablelm", stablelm), "StableLMEpochForCausalLM": ("stablelm", stablelm),
    "GemmaForCausalLM": ("gemma", gemma), "PhiMoEForCausalLM": ("phimoe", phimoe),
    "Ministral3ForCausalLM": ("mistral3", ministral3), "Phi3ForCausalLM": ("phi3", phi3),
    "DeepseekV2ForCausalLM": ("deepseek2", deepseek2), "DeepseekV3ForCausalLM": ("deepseek2", deepseek2),
    "Gemma2ForCausalLM": ("gemma2", gemma2), "Gemma3ForCausalLM": ("gemma3", gemma3),
    "Gemma3ForConditionalGeneration": ("gemma3", gemma3), "FalconForCausalLM": ("falcon", falcon),
    "GPTNeoXForCausalLM": ("gptneox", gptneox),
}


def converted(config: dict) -> tuple[str, Keys, dict]:
    """(GGUF arch, keys, tensors) convert_hf_to_gguf.py writes for a raw HF config.json."""
    arch, writer = CLASSES[config["architectures"][0]]
    hparams = {**config, **config["text_config"]} if "text_config" in config else dict(config)
    keys, tensors = Keys(), {}
    writer(hparams, rope_parameters(hparams), keys, tensors)
    return arch, keys, tensors


def write(path, config: dict, *, arch: str | None = None, pad: int = 0, rope_last: bool = False, **changes) -> str:
    """The GGUF of `config` as the converter writes it, with `changes` (see the module docstring); `arch`
    overrides general.architecture (the keys move with it, as a file relabelled by hand would have them);
    `pad` bytes of a stand-in weight follow the RoPE tensors, or precede them with `rope_last` (llama-quantize
    writes tensors sorted by name: blk.* before rope_freqs)."""
    own_arch, keys, tensors = converted(config)
    arch = arch or own_arch
    for name, value in changes.items():
        target = tensors if name in ("rope_freqs", "rope_factors_long", "rope_factors_short") else keys
        if value is None:
            target.pop(name, None)
        elif target is tensors:
            tensors[name] = np.asarray(value, np.float32)
        else:
            kind = keys[name][1] if name in keys else None
            keys.put(name, value, kind)
    w = gguf.GGUFWriter(str(path), arch)
    for name, (value, kind) in keys.items():
        w.add_key_value(name if name.startswith("general.") else f"{arch}.{name}", value, kind)
    weights = {"blk.0.attn_q.weight": np.zeros(pad // 4, np.float32)} if pad else {}
    for name, values in ({**weights, **tensors} if rope_last else {**tensors, **weights}).items():
        w.add_tensor(name if name.endswith(".weight") else f"{name}.weight", values)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)
