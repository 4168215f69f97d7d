"""Per-family RoPE goldens from transformers' own classes: rotary embedding + apply_rotary_pos_emb.

For every fixture under tests/fixtures/hf_configs/ and every layer type that uses RoPE, this
builds the family's RotaryEmbedding from the fixture (transformers 5.24, `AutoConfig.for_model`),
takes cos/sin at probe positions and rotates fixed random q, k with that family's apply
function (the layout check: scores q_i . k_j, not tables). Each is computed twice:

* float32, as transformers runs it;
* float64: the same functions with `torch.float` / `torch.float32`, `Tensor.float()` and the
  default dtype switched to float64 while they run (`float64_reference`), so frequencies,
  angles and rotations are HF's own code in float64 -- sharp enough to check posenc's float64.

ChatGLM has no transformers class: `chatglm_cos_sin` / `chatglm_apply` restate THUDM's
modeling_chatglm.py math (RotaryEmbedding(head // 2), base 10000 * rope_ratio, pairs
(x_2i, x_2i+1) of the first half of the head) in torch.

Written to model_rope.npz as arrays "<fixture>|<layer_type>|<probes>|<name>".
"""

from __future__ import annotations

import contextlib
import importlib
import json
from pathlib import Path

import numpy as np
import torch
from transformers import AutoConfig

HERE = Path(__file__).parent
CONFIGS = HERE.parent / "fixtures" / "hf_configs"
OUT = HERE / "model_rope.npz"
PROBES = {"short": [0, 1, 7, 4095], "long": [0, 1, 4095, 100000]}
TABLE_PROBES = {"short": [0, 1, 1000, 2047]}  # GPT-J / CodeGen precompute n_positions rows only

# model_type -> (module, rotary class, apply function, how cos/sin hold the frequencies)
LLAMA_LIKE = {
    "llama": "llama", "mistral": "mistral", "mixtral": "mixtral", "qwen2": "qwen2", "qwen2_moe": "qwen2_moe",
    "qwen3": "qwen3", "qwen3_moe": "qwen3_moe", "phi3": "phi3", "phimoe": "phimoe", "gemma": "gemma",
    "gemma2": "gemma2", "gemma3_text": "gemma3", "cohere": "cohere", "cohere2": "cohere2", "glm": "glm",
    "glm4": "glm4", "deepseek_v3": "deepseek_v3", "gpt_neox": "gpt_neox", "stablelm": "stablelm", "olmo": "olmo",
    "olmo2": "olmo2", "falcon": "falcon", "modernbert": "modernbert", "deepseek_v2": "deepseek_v2",
    "gptj": "gptj", "codegen": "codegen",
}
CLASS_NAMES = {
    "llama": "Llama", "mistral": "Mistral", "mixtral": "Mixtral", "qwen2": "Qwen2", "qwen2_moe": "Qwen2Moe",
    "qwen3": "Qwen3", "qwen3_moe": "Qwen3Moe", "phi3": "Phi3", "phimoe": "Phimoe", "gemma": "Gemma",
    "gemma2": "Gemma2", "gemma3": "Gemma3", "cohere": "Cohere", "cohere2": "Cohere2", "glm": "Glm", "glm4": "Glm4",
    "deepseek_v3": "DeepseekV3", "deepseek_v2": "DeepseekV2", "gpt_neox": "GPTNeoX", "stablelm": "StableLm",
    "olmo": "Olmo", "olmo2": "Olmo2", "falcon": "Falcon", "modernbert": "ModernBert", "gptj": "GPTJ",
    "codegen": "CodeGen",
}
INTERLEAVED_CACHE = ("cohere", "cohere2")  # cos/sin = repeat_interleave(freqs), not cat(freqs, freqs)
SPLIT_IN_ATTENTION = ("stablelm", "gptj", "codegen")  # attention slices q[..., :rotary_ndims] itself


@contextlib.contextmanager
def float64_reference():
    """Run transformers' float32 RoPE code in float64 (its dtype constants swapped while it runs)."""
    saved = torch.float, torch.float32, torch.get_default_dtype(), torch.Tensor.float
    torch.float = torch.float32 = torch.float64
    torch.Tensor.float = torch.Tensor.double  # LongRoPE's `arange(...).float() / dim` exponent, `.float()` casts
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.float, torch.float32, _, torch.Tensor.float = saved
        torch.set_default_dtype(saved[2])


def hf_view(raw: dict) -> dict:
    """The config transformers would build the language model from."""
    if raw["model_type"] == "gemma3":
        return raw["text_config"]
    if raw["model_type"] == "stablelm_epoch":  # remote code: rope_pct is its partial rotary factor
        out = {k: v for k, v in raw.items() if k not in ("auto_map", "rope_pct", "norm_eps")}
        return {**out, "model_type": "stablelm", "partial_rotary_factor": raw["rope_pct"]}
    return raw


def attention_head_dim(config, model_type: str) -> int:
    """The head size the attention code rotates (the q/k vectors the apply function sees)."""
    if model_type in ("deepseek_v2", "deepseek_v3"):
        return config.qk_rope_head_dim
    if model_type in ("gptj", "codegen"):
        return config.n_embd // config.n_head
    if model_type in ("stablelm", "falcon", "modernbert", "gpt_neox", "cohere2"):
        return config.hidden_size // config.num_attention_heads
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads


def rope_layer_types(raw: dict, config, model_type: str) -> list[str | None]:
    """posenc's layer-type keys whose RoPE differs: per-type modules for Gemma-3 / ModernBERT."""
    if model_type in ("gemma3_text", "modernbert"):
        return sorted(set(config.layer_types))
    return [None]


def posenc_layer_type(model_type: str, layer_type: str | None) -> str:
    if layer_type is not None:
        return layer_type
    return "sliding_attention" if model_type == "cohere2" else "default"


def _module(family: str, name: str):
    return importlib.import_module(f"transformers.models.{family}.modeling_{family}"), CLASS_NAMES[family] + name


def cos_sin_and_rotate(raw: dict, positions: list[int], q: np.ndarray, k: np.ndarray, layer_type, dtype):
    """(cos [n, n_freq], sin [n, n_freq], q_rot, k_rot) from the family's own code, in `dtype`."""
    model_type = hf_view(raw)["model_type"]
    if model_type == "chatglm":
        return chatglm_reference(raw, positions, q, k, dtype)
    config = AutoConfig.for_model(**hf_view(raw))
    family = LLAMA_LIKE[model_type]
    module, prefix = _module(family, "")
    pos = torch.tensor([positions])
    qt = torch.tensor(q, dtype=dtype)[None, None]  # [1, 1, n, d]: batch, heads, seq, head_dim
    kt = torch.tensor(k, dtype=dtype)[None, None]
    if family in ("gptj", "codegen"):
        rotary = getattr(module, prefix + "RotaryEmbedding")(config)
        sin, cos = rotary(qt, pos)
        rot = cos.shape[-1] * 2
        q4, k4 = qt.transpose(1, 2), kt.transpose(1, 2)  # GPT-J rotates [b, s, h, d]
        q_rot = torch.cat([module.apply_rotary_pos_emb(q4[..., :rot], sin, cos), q4[..., rot:]], -1)
        k_rot = torch.cat([module.apply_rotary_pos_emb(k4[..., :rot], sin, cos), k4[..., rot:]], -1)
        return cos[0].to(dtype), sin[0].to(dtype), q_rot[0, :, 0], k_rot[0, :, 0]
    rotary = getattr(module, prefix + "RotaryEmbedding")(config=config)
    x = torch.zeros(1, len(positions), 8, dtype=dtype)
    if family == "deepseek_v2":
        freqs_cis = rotary(x, pos)
        q_rot, k_rot = module.apply_rotary_emb(qt, kt, freqs_cis)
        return freqs_cis[0].real, freqs_cis[0].imag, q_rot[0, 0], k_rot[0, 0]
    cos, sin = rotary(x, pos, layer_type) if layer_type is not None else rotary(x, pos)
    if family == "deepseek_v3" and config.rope_interleave:
        q_rot, k_rot = module.apply_rotary_pos_emb_interleave(qt, kt, cos, sin)
    elif family in SPLIT_IN_ATTENTION:
        rot = cos.shape[-1]
        q_r, k_r = module.apply_rotary_pos_emb(qt[..., :rot], kt[..., :rot], cos, sin)
        q_rot, k_rot = torch.cat([q_r, qt[..., rot:]], -1), torch.cat([k_r, kt[..., rot:]], -1)
    else:
        q_rot, k_rot = module.apply_rotary_pos_emb(qt, kt, cos, sin)
    half = cos.shape[-1] // 2
    if family in INTERLEAVED_CACHE:
        cos, sin = cos[..., ::2], sin[..., ::2]
    else:
        cos, sin = cos[..., :half], sin[..., :half]
    return cos[0], sin[0], q_rot[0, 0], k_rot[0, 0]


def chatglm_reference(raw: dict, positions, q, k, dtype):
    """THUDM ChatGLM2/3/GLM-4-chat RoPE, restated: cache [cos, sin] of (10000*rope_ratio)^(-2i/n_elem)."""
    head = raw.get("kv_channels") or raw["hidden_size"] // raw["num_attention_heads"]
    n_elem = head // 2
    base = 10000 * raw.get("rope_ratio", 1)
    theta = 1.0 / (base ** (torch.arange(0, n_elem, 2, dtype=dtype) / n_elem))
    angles = torch.outer(torch.tensor(positions, dtype=dtype), theta)
    cos, sin = torch.cos(angles), torch.sin(angles)

    def rotate(x):
        x = torch.tensor(x, dtype=dtype)
        pairs, rest = x[:, :n_elem].reshape(len(positions), -1, 2), x[:, n_elem:]
        even, odd = pairs[..., 0], pairs[..., 1]
        out = torch.stack([even * cos - odd * sin, odd * cos + even * sin], -1).flatten(1)
        return torch.cat([out, rest], -1)

    return cos, sin, rotate(q), rotate(k)


def probes_for(raw: dict) -> dict:
    """Long probes (0, 1, 4095, 100000) for every family; also short ones (all <= 4096) where the
    frequencies depend on the sequence length (LongRoPE, dynamic) or a table caps positions."""
    view = hf_view(raw)
    if view["model_type"] in ("gptj", "codegen"):
        return TABLE_PROBES
    scaling = view.get("rope_scaling") or view.get("rope_parameters") or {}
    if scaling.get("rope_type", scaling.get("type")) in ("longrope", "su", "dynamic"):
        return PROBES
    return {"long": PROBES["long"]}


def fixtures() -> list[tuple[str, dict]]:
    """Every config fixture, plus "defaults-<model_type>": a bare {"model_type": ...}, so the
    config classes' own defaults (sizes, base, head_dim, partial rotary, layout) are checked too."""
    out = [(path.stem, json.loads(path.read_text())) for path in sorted(CONFIGS.glob("*.json"))]
    bare = sorted(set(LLAMA_LIKE) - {"gemma3_text"}) + ["gemma3"]
    return out + [(f"defaults-{model_type}", {"model_type": model_type}) for model_type in bare]


def layer_type_names(raw: dict, config, model_type: str) -> list[str]:
    """posenc's layer type of each layer ("none" where the layer has no position encoding)."""
    if config is None:  # chatglm
        return ["default"] * raw.get("num_layers", 28)
    if model_type in ("gemma3_text", "modernbert"):
        return list(config.layer_types)
    if model_type == "cohere2":
        return [t if t == "sliding_attention" else "none" for t in config.layer_types]
    return ["default"] * config.num_hidden_layers


def model_goldens() -> dict[str, np.ndarray]:
    out = {}
    for stem, raw in fixtures():
        if raw["model_type"] == "gemma3" and "text_config" not in raw:
            raw = {**raw, "text_config": {"model_type": "gemma3_text"}}
        view = hf_view(raw)
        if view["model_type"] not in LLAMA_LIKE and view["model_type"] != "chatglm":
            continue
        if view["model_type"] == "falcon" and view.get("alibi"):
            continue  # ALiBi: the bias goldens cover it
        config = None if view["model_type"] == "chatglm" else AutoConfig.for_model(**view)
        head_dim = (raw.get("kv_channels") or 128) if config is None else attention_head_dim(config, view["model_type"])
        rng = np.random.RandomState(sum(map(ord, stem)))
        out[f"{stem}|layer_types"] = np.array(layer_type_names(view, config, view["model_type"]))
        layer_types = [None] if config is None else rope_layer_types(view, config, view["model_type"])
        for layer_type in layer_types:
            key_type = posenc_layer_type(view["model_type"], layer_type)
            for probe_name, positions in probes_for(raw).items():
                # float16 values: exact in every dtype the references and posenc run in
                q, k = rng.standard_normal((2, len(positions), head_dim)).astype(np.float16)
                prefix = f"{stem}|{key_type}|{probe_name}|"
                out[prefix + "positions"] = np.array(positions, dtype=np.int64)
                out[prefix + "q"], out[prefix + "k"] = q, k
                q, k = q.astype(np.float64), k.astype(np.float64)
                with float64_reference():
                    cos, sin, q_rot, k_rot = cos_sin_and_rotate(raw, positions, q, k, layer_type, torch.float64)
                out[prefix + "cos64"], out[prefix + "sin64"] = cos.numpy(), sin.numpy()
                out[prefix + "scores64"] = (q_rot @ k_rot.T).numpy()
                cos, sin, q_rot, k_rot = cos_sin_and_rotate(raw, positions, q.astype(np.float32),
                                                            k.astype(np.float32), layer_type, torch.float32)
                out[prefix + "cos32"], out[prefix + "sin32"] = cos.numpy(), sin.numpy()
                out[prefix + "scores32"] = (q_rot @ k_rot.T).numpy()
    return out


def reference_facts() -> dict[str, np.ndarray]:
    """Behaviours of the reference the model table of docs/model-families.md states, recorded from transformers itself."""
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import yarn_apply_mscale

    stablelm = AutoConfig.for_model("stablelm", rope_pct=0.5)  # the legacy key is not read
    cohere2 = AutoConfig.for_model("cohere2", hidden_size=4096, num_attention_heads=32, head_dim=64)
    gptj_module, _ = _module("gptj", "")
    gptj = gptj_module.GPTJRotaryEmbedding(AutoConfig.for_model(**json.loads((CONFIGS / "gpt-j-6b.json").read_text())))
    deepseek = AutoConfig.for_model(**json.loads((CONFIGS / "deepseek-v3.json").read_text()))
    return {
        "facts|stablelm_rope_pct_0.5|partial_rotary_factor": np.array(stablelm.rope_parameters["partial_rotary_factor"]),
        "facts|cohere2_head_dim_64|head_dim": np.array(cohere2.head_dim),
        "facts|gpt-j-6b|table_rows": np.array(gptj.embed_positions.shape[0]),
        "facts|deepseek-v3|softmax_scale_over_plain": np.array(
            yarn_apply_mscale(deepseek.rope_parameters, 1.0)),
    }


def main():
    goldens = {**model_goldens(), **reference_facts()}
    np.savez_compressed(OUT, **goldens)
    print("wrote", OUT, len(goldens), "arrays")


if __name__ == "__main__":
    main()
