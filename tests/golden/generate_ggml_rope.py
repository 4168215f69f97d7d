"""Regenerate ggml_rope.npz: the cos/sin llama.cpp's CPU RoPE (ggml_rope_ext, NEOX mode) uses, read back from
real ggml, for the llama.cpp recipe in tests/audit_recipes.py to be checked against.

Needs ggml-python (ggml's own C code with Python bindings; not a test dependency):

    python -m venv /tmp/ggml && /tmp/ggml/bin/pip install ggml-python==0.0.45 numpy
    /tmp/ggml/bin/python tests/golden/generate_ggml_rope.py

A unit input (ones in the first half of each head, zeros in the second) rotated by ggml_rope_ext comes out
as [cos_i | sin_i] of every frequency i at every position: ggml's own float32 arithmetic (theta_scale =
powf(freq_base, -2/n_dims), theta multiplied up frequency by frequency, the YaRN ramp and mscale),
computed once per setup at positions 0..63 and 192 log-spaced ones up to 131071.
"""

import json
import math
from pathlib import Path

import ggml
import numpy as np
from ggml.utils import from_numpy, to_numpy

OUT = Path(__file__).parent / "ggml_rope.npz"
#: The setups: llama.cpp's ggml_rope_ext parameters as it runs each model from a converted GGUF.
SETUPS = {
    # Qwen2-7B-Instruct with YaRN factor 4 over 32768 (rope.scaling.type yarn): ext_factor 1, beta 32/1.
    "qwen2_yarn": {"n_dims": 128, "freq_base": 1e6, "freq_scale": 0.25, "ext_factor": 1.0, "attn_factor": 1.0,
                   "n_ctx_orig": 32768, "beta_fast": 32.0, "beta_slow": 1.0},
    # Llama-3.1-8B: plain RoPE at base 5e5 divided by the converter's rope_freqs tensor.
    "llama3": {"n_dims": 128, "freq_base": 5e5, "freq_scale": 1.0, "ext_factor": 0.0, "attn_factor": 1.0,
               "n_ctx_orig": 8192, "beta_fast": 32.0, "beta_slow": 1.0},
    # Plain RoPE at base 1e4 (Llama-2), head_dim 64.
    "plain": {"n_dims": 64, "freq_base": 1e4, "freq_scale": 1.0, "ext_factor": 0.0, "attn_factor": 1.0,
              "n_ctx_orig": 4096, "beta_fast": 32.0, "beta_slow": 1.0},
}


def llama3_rope_freqs(n_dims: int, base: float, factor=8.0, low=1.0, high=4.0, old_context=8192) -> np.ndarray:
    """The rope_freqs tensor convert_hf_to_gguf.py writes for a llama3 rope_scaling (float32 divisors)."""
    freqs = 1.0 / (base ** (np.arange(0, n_dims, 2, dtype=np.float32) / n_dims))
    out = []
    for freq in freqs.astype(np.float64):
        wavelen = 2 * math.pi / freq
        if wavelen < old_context / high:
            out.append(1.0)
        elif wavelen > old_context / low:
            out.append(factor)
        else:
            smooth = (old_context / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.asarray(out, np.float32)


def ggml_cos_sin(positions: np.ndarray, setup: dict, freq_factors: np.ndarray | None):
    n, n_dims = positions.size, setup["n_dims"]
    ctx = ggml.ggml_init(ggml.ggml_init_params(mem_size=64 * n * n_dims + (16 << 20), mem_buffer=None,
                                               no_alloc=False))
    x = np.zeros((n, 1, n_dims), np.float32)
    x[..., : n_dims // 2] = 1.0
    a = from_numpy(x, ctx)  # ne0 = n_dims, ne1 = one head, ne2 = n tokens
    b = from_numpy(positions.astype(np.int32), ctx)
    c = from_numpy(freq_factors, ctx) if freq_factors is not None else None
    out = ggml.ggml_rope_ext(ctx, a, b, c, n_dims, ggml.GGML_ROPE_TYPE_NEOX, setup["n_ctx_orig"], setup["freq_base"],
                             setup["freq_scale"], setup["ext_factor"], setup["attn_factor"], setup["beta_fast"],
                             setup["beta_slow"])
    graph = ggml.ggml_new_graph(ctx)
    ggml.ggml_build_forward_expand(graph, out)
    ggml.ggml_graph_compute_with_ctx(ctx, graph, 1)
    y = to_numpy(out).reshape(n, n_dims).copy()
    ggml.ggml_free(ctx)
    return y[:, : n_dims // 2], y[:, n_dims // 2:]


def main():
    positions = np.unique(np.concatenate([np.arange(64), np.geomspace(64, 131071, 192).astype(np.int64)]))
    arrays = {"positions": positions.astype(np.int32)}
    for name, setup in SETUPS.items():
        factors = llama3_rope_freqs(setup["n_dims"], setup["freq_base"]) if name == "llama3" else None
        cos, sin = ggml_cos_sin(positions, setup, factors)
        arrays[f"{name}.cos"], arrays[f"{name}.sin"] = cos, sin
        arrays[f"{name}.params"] = np.frombuffer(json.dumps(setup).encode(), np.uint8)
        if factors is not None:
            arrays[f"{name}.freq_factors"] = factors
    np.savez_compressed(OUT, **arrays)
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
