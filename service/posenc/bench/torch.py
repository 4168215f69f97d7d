"""`posenc bench torch`: posenc.torch against transformers' own rotary module, on the CPU.

Two tables. Speed: building the cos/sin cache for 131072 positions (Llama-3.1-8B's RoPE,
head_dim 128, float32) with the stock LlamaRotaryEmbedding, with posenc.torch.cos_sin, and with
ExactRotaryEmbedding cold (cache built) and warm (rows indexed from its cache); each row's
max error against the float64 values. Accuracy: for a tiny random model of every RoPE family
(posenc.bench.torch_models), max |logits - float64 truth| of the stock and of the patched model.
"""

from __future__ import annotations

import numpy as np

from ..cli.options import add_flag
from ..errors import PosencError
from .timing import machine_line, markdown_table, measure

LLAMA_31 = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "head_dim": 128,
            "max_position_embeddings": 131072, "rope_theta": 500000.0,
            "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                             "original_max_position_embeddings": 8192}}


def add_arguments(parser) -> None:
    add_flag(parser, "--rows", old=("--positions",), type=int, default=131072,
             help="rows of the cos/sin cache: positions 0..ROWS-1 (default %(default)s)")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per row, median reported")
    parser.add_argument("--no-accuracy", action="store_true", help="skip the per-family logit table")


def run(args) -> str:
    try:
        import torch
        import transformers  # noqa: F401  (its LlamaRotaryEmbedding and tiny models are the baselines)
    except ModuleNotFoundError as exc:
        raise PosencError("bench torch", f"needs {exc.name}, which posenc does not install by itself: pip "
                          "install 'posenc[torch]' transformers (a checkout: make install-test)") from None

    torch.set_num_threads(1)
    parts = [_speed(args.rows, args.repeats)]
    if not args.no_accuracy:
        parts.append(_accuracy())
    parts.append(f"One thread (torch.set_num_threads(1)), torch {torch.__version__}. Machine: {machine_line()}.")
    return "\n\n".join(parts)


def _speed(n: int, repeats: int) -> str:
    import torch
    from transformers import AutoConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    from .. import rope_cos_sin
    from ..torch import ExactRotaryEmbedding, cos_sin
    from ..torch.rotary import rope_layers

    config = AutoConfig.for_model(**LLAMA_31)
    spec = rope_layers(LLAMA_31)["default"]
    stock = LlamaRotaryEmbedding(config)
    exact = ExactRotaryEmbedding(LLAMA_31)
    x = torch.zeros(1, dtype=torch.float32)
    ids = torch.arange(n)[None]
    truth, _ = rope_cos_sin(np.arange(n), spec, dtype="float64")
    nbytes = 2 * n * 2 * truth.shape[1] * 4

    def cold():
        exact.cache.clear()
        exact(x, ids)

    cases = [("transformers LlamaRotaryEmbedding (float32 angles)", lambda: stock(x, ids)),
             ("posenc.torch.cos_sin", lambda: cos_sin(ids, spec)),
             ("ExactRotaryEmbedding, cold (builds its cache)", cold),
             ("ExactRotaryEmbedding, warm (rows from its cache)", lambda: exact(x, ids))]
    rows, base = [], None
    for label, fn in cases:
        timing = measure(label, fn, nbytes, repeats=repeats)
        cos = fn() if label.startswith(("transformers", "posenc")) else exact(x, ids)
        err = np.abs(cos[0].reshape(n, -1)[:, : truth.shape[1]].double().numpy() - truth).max()
        base = base or timing.seconds
        bandwidth = "a view, no copy" if "warm" in label else f"{timing.gbps:.2f}"
        rows.append([label, f"{timing.seconds * 1e3:.2f}", bandwidth, f"{base / timing.seconds:.1f}x", f"{err:.1e}"])
    return (f"cos/sin cache for {n} positions, Llama-3.1-8B RoPE (head_dim 128), float32 out:\n\n"
            + markdown_table(["implementation", "ms (median)", "GB/s", "vs transformers", "max error vs float64"],
                             rows))


def _accuracy() -> str:
    from . import torch_models

    rows = []
    for name in torch_models.CONFIGS:
        errors = torch_models.logit_errors(torch_models.build(name), starts=(0, 100_000, 1_000_000))
        cells = [name]
        for start in (0, 100_000, 1_000_000):
            stock, patched = errors[start]
            cells += [f"{stock:.1e} / {patched:.1e}"]
        cells.append(f"{errors[1_000_000][0] / errors[1_000_000][1]:.0f}x")
        rows.append(cells)
    return ("max |logits - float64 truth|, stock / patched (`posenc.torch.patch_model`), tiny random models "
            "in float32, 16 positions from the start shown:\n\n"
            + markdown_table(["model", "positions 0..15", "100,000..", "1,000,000..", "stock / patched at 1e6"],
                             rows))
