"""Broken RoPE caches built the ways real frameworks build them (for tests/test_audit*.py and the
explorer's browser test). Each recipe returns named arrays, as a framework would save them."""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np

import posenc

CONFIGS = Path(__file__).parent / "fixtures" / "hf_configs"
F32 = np.float32
#: Gemma-3-1B's text config (two layer types: sliding_attention at base 1e4, full_attention at 1e6).
GEMMA3 = {"model_type": "gemma3_text", "hidden_size": 1152, "head_dim": 256, "num_attention_heads": 4,
          "num_key_value_heads": 1, "num_hidden_layers": 26, "max_position_embeddings": 32768,
          "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "rope_scaling": None, "sliding_window": 512,
          "sliding_window_pattern": 6, "query_pre_attn_scalar": 256}


def config(name: str, **overrides) -> dict:
    doc = json.loads((CONFIGS / f"{name}.json").read_text())
    doc.update(overrides)
    return doc


def half(a: np.ndarray) -> np.ndarray:
    """HF's emb = cat(freqs, freqs) layout."""
    return np.concatenate([a, a], axis=-1)


def interleaved(a: np.ndarray) -> np.ndarray:
    """GPT-J / RoFormer repeat_interleave layout."""
    return np.repeat(a, 2, axis=-1)


def exact(spec: posenc.RopeSpec, positions, dtype="float32") -> dict:
    cos, sin = posenc.rope_cos_sin(positions, spec, dtype=dtype)
    return {"cos": half(cos), "sin": half(sin)}


def textbook_float32(n: int, dim: int, base: float = 10000.0) -> dict:
    """The numpy recipe of countless tutorials: everything float32."""
    inv_freq = 1.0 / (base ** (np.arange(0, dim, 2, dtype=F32) / dim))
    t = np.arange(n, dtype=F32)
    freqs = np.outer(t, inv_freq.astype(F32))
    emb = np.concatenate([freqs, freqs], axis=-1)
    return {"cos": np.cos(emb).astype(F32), "sin": np.sin(emb).astype(F32)}


def hf_llama(config_dict: dict, n: int) -> dict:
    """transformers' own LlamaRotaryEmbedding forward (float32 angles), as a HF model computes it."""
    import torch
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    cfg = LlamaConfig(**{k: v for k, v in config_dict.items() if k not in ("architectures", "model_type")})
    rope = LlamaRotaryEmbedding(cfg)
    x = torch.zeros(1, n, 8, dtype=torch.float32)
    cos, sin = rope(x, torch.arange(n)[None])
    return {"cos": cos[0].numpy(), "sin": sin[0].numpy()}


def positions_cast(spec: posenc.RopeSpec, n: int, dtype) -> dict:
    """position_ids cast to the model dtype before the product (angles then float32)."""
    inv, attention = posenc.rope_inv_freq(spec)
    p = np.arange(n).astype(dtype).astype(F32)
    angle = np.outer(p, inv.astype(F32))
    return {"cos": half(np.cos(angle) * F32(attention)), "sin": half(np.sin(angle) * F32(attention))}


def bf16_positions(spec, n):
    return positions_cast(spec, n, ml_dtypes.bfloat16)


def stored(arrays: dict, dtype) -> dict:
    return {k: v.astype(dtype) for k, v in arrays.items()}


def interleaved_read_as_half(spec, n) -> dict:
    """An interleaved cache [c0 c0 c1 c1 ...] whose user took cos[:, :d/2] as the half-split frequencies."""
    cos, sin = posenc.rope_cos_sin(np.arange(n), spec)
    k = cos.shape[1]
    return {"cos": interleaved(cos)[:, :k], "sin": interleaved(sin)[:, :k]}


def without_attention_factor(spec, n) -> dict:
    inv, _ = posenc.rope_inv_freq(spec)
    angle = np.outer(np.arange(n, dtype=np.float64), inv)
    return {"cos": half(np.cos(angle)).astype(F32), "sin": half(np.sin(angle)).astype(F32)}


def from_position_one(spec, n) -> dict:
    return exact(spec, np.arange(1, n + 1))


def angles_in(spec, n, dtype) -> dict:
    """inv_freq and positions in the model dtype, their product rounded to it (a model run in bf16/fp16)."""
    inv, attention = posenc.rope_inv_freq(spec)
    p = np.arange(n).astype(dtype).astype(F32)
    angle = (p[:, None] * inv.astype(dtype).astype(F32)[None, :]).astype(dtype).astype(F32)
    return {"cos": half(np.cos(angle) * F32(attention)), "sin": half(np.sin(angle) * F32(attention))}


def attention_twice(spec, n) -> dict:
    """The attention factor multiplied in when building the cache and again by the rotary module."""
    cos, sin = posenc.rope_cos_sin(np.arange(n), spec, dtype="float64")
    attention = posenc.rope_inv_freq(spec)[1]
    return {"cos": half(cos * attention).astype(F32), "sin": half(sin * attention).astype(F32)}


def float64_angles(n: int, dim: int, base: float) -> dict:
    """A float64 cache the way careful code builds it: float64 inv_freq = base ** -(2i/d), p * inv_freq
    and cos/sin in float64; the angle carries a few ulp of its own rounding (~4e-13 at 131072)."""
    inv = base ** -(np.arange(0, dim, 2, dtype=np.float64) / dim)
    angle = np.arange(n, dtype=np.float64)[:, None] * inv[None, :]
    return {"cos": half(np.cos(angle)), "sin": half(np.sin(angle))}


def hf_rope(config_dict: dict, n: int, *, dtype=None, seq_len: int | None = None) -> dict:
    """transformers' LlamaRotaryEmbedding as a model runs it: `module.to(dtype)` (which rounds the
    inv_freq buffer to that dtype) and x in that dtype; seq_len, if given, is the length the
    dynamic module last grew to (a forward over seq_len positions first)."""
    import torch
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    cfg = LlamaConfig(**{k: v for k, v in config_dict.items() if k not in ("architectures", "model_type")})
    rope = LlamaRotaryEmbedding(cfg)
    torch_dtype = torch.float32 if dtype is None else dtype
    rope = rope.to(torch_dtype)
    x = torch.zeros(1, n, 8, dtype=torch_dtype)
    if seq_len is not None:
        rope(x, torch.arange(seq_len)[None])
    cos, sin = rope(x, torch.arange(n)[None])
    to_np = (lambda t: t.float().numpy().astype(ml_dtypes.bfloat16)) if torch_dtype == torch.bfloat16 else \
        (lambda t: t.numpy())
    return {"cos": to_np(cos[0]), "sin": to_np(sin[0])}


def at_seq_len(spec, n, seq_len) -> dict:
    """A length-dependent spec (dynamic NTK, LongRoPE) computed for `seq_len` (None: at init, as the module
    is built), whatever n is."""
    inv, attention = posenc.rope_inv_freq(spec, seq_len=seq_len)
    angle = np.outer(np.arange(n, dtype=np.float64), inv)
    return {"cos": half(np.cos(angle) * attention).astype(F32), "sin": half(np.sin(angle) * attention).astype(F32)}


def random_angles(n, k, seed=0) -> dict:
    angle = np.random.default_rng(seed).uniform(-np.pi, np.pi, (n, k))
    return {"cos": half(np.cos(angle)).astype(F32), "sin": half(np.sin(angle)).astype(F32)}


def llama_cpp_rope(positions, n_dims: int, freq_base: float, *, freq_scale: float = 1.0, ext_factor: float = 0.0,
                   attn_factor: float = 1.0, n_ctx_orig: int = 0, beta_fast: float = 32.0, beta_slow: float = 1.0,
                   freq_factors=None) -> tuple[np.ndarray, np.ndarray]:
    """(cos, sin) float32 [n, n_dims/2] as llama.cpp's CPU rope (ggml_rope_ext) forms them, written from its
    arithmetic in torch float32: theta_scale = powf(freq_base, -2/n_dims); theta starts at the position and is
    multiplied by theta_scale from one frequency to the next; each is divided by its freq_factor, scaled by
    freq_scale and, with ext_factor, blended YaRN-style by the ramp between ggml_rope_yarn_corr_dims (one fma,
    as compilers contract it on FMA hardware); amplitude attn_factor, times 1 + 0.1 ln(1/freq_scale) with
    ext_factor. tests/golden/ggml_rope.npz holds real ggml's output to check it against."""
    import math

    import torch

    f32 = torch.float32
    one = torch.tensor(1.0, dtype=f32)

    def f(x):
        return torch.tensor(x, dtype=f32)

    def corr_dim(rotations):
        turns = f(n_ctx_orig) / (f(rotations) * f(2.0) * f(math.pi))
        return f(n_dims) * torch.log(turns) / (f(2.0) * torch.log(f(freq_base)))

    low = max(0.0, math.floor(float(corr_dim(beta_fast))))
    high = min(n_dims - 1.0, math.ceil(float(corr_dim(beta_slow))))
    theta_scale = f(math.pow(float(f(freq_base)), float(f(-2.0) / n_dims)))
    theta = torch.as_tensor(np.asarray(positions), dtype=torch.int64).to(f32)
    mscale = f(attn_factor) * (one + f(0.1) * torch.log(one / f(freq_scale))) if ext_factor else f(attn_factor)
    columns = []
    for i in range(n_dims // 2):
        extrap = theta if freq_factors is None else theta / f(float(freq_factors[i]))
        interp = f(freq_scale) * extrap
        if ext_factor:
            y = (f(i) - f(low)) / torch.maximum(f(0.001), f(high) - f(low))
            mix = (one - torch.clamp(y, 0.0, 1.0)) * f(ext_factor)
            blended = interp.double() * (one - mix).double() + (extrap * mix).double()
            interp = blended.to(f32)
        columns.append(interp)
        theta = theta * theta_scale
    angle = torch.stack(columns, dim=1).double()
    return ((torch.cos(angle).to(f32) * mscale).numpy(), (torch.sin(angle).to(f32) * mscale).numpy())


def torch_rope(spec: posenc.RopeSpec, positions) -> dict:
    """`freqs = torch.outer(positions, inv_freq)` with a float32 inv_freq buffer, cos/sin in float32, HF layout:
    the positions as the caller made them (a bfloat16 arange promotes to float32 in the product)."""
    import torch

    inv, attention = posenc.rope_inv_freq(spec)
    freqs = torch.outer(positions.float(), torch.from_numpy(inv.astype(F32)))
    emb = torch.cat([freqs, freqs], dim=-1)
    return {"cos": (emb.cos() * attention).numpy(), "sin": (emb.sin() * attention).numpy()}


def arange_in_bfloat16(spec, n: int) -> dict:
    """`t = torch.arange(n, dtype=torch.bfloat16)`: torch's CPU kernel adds the index within a vector to the
    vector's rounded start, so beyond 4096 some rows hold the bfloat16 neighbour below the nearest one."""
    import torch

    return torch_rope(spec, torch.arange(n, dtype=torch.bfloat16))


def position_ids_in_model_dtype(spec, start: int, n: int) -> dict:
    """A decode step's `position_ids = torch.arange(past, past + n).to(model_dtype)` (bfloat16), every row
    above 256 rounded."""
    import torch

    return torch_rope(spec, torch.arange(start, start + n).to(torch.bfloat16))


def float64_exp_log(n: int, dim: int, base: float, form: str) -> dict:
    """A float64 cache whose inv_freq is an exponential, as sinusoidal code writes it: "exp_log" =
    exp(-ln(base) * arange(0, d, 2) / d); "div_term" = exp(arange(0, d, 2) * (-ln(base) / d)) (torch float64)."""
    import math

    import torch

    i = torch.arange(0, dim, 2, dtype=torch.float64)
    inv = torch.exp(-math.log(base) * (i / dim)) if form == "exp_log" else torch.exp(i * (-math.log(base) / dim))
    angle = torch.outer(torch.arange(n, dtype=torch.float64), inv)
    return {"cos": half(angle.cos().numpy()), "sin": half(angle.sin().numpy())}
