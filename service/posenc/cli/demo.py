"""`posenc demo`: print a few encodings, to see at a glance that everything works."""

from __future__ import annotations

import json
from pathlib import Path

LLAMA_31_8B = {
    "model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
}


def register(sub) -> None:
    p = sub.add_parser("demo", help="print a few encodings")
    p.add_argument("--config", type=Path, help="a model's config.json: print its RoPE spec and cache")
    p.set_defaults(handler=run)


def run(args) -> int:
    import numpy as np

    from .. import alibi_slopes, rope_cos_sin, sinusoidal, t5_relative_position_bucket
    from ..encodings import RopeSpec

    np.set_printoptions(precision=6, suppress=True, linewidth=110)
    print("sinusoidal(positions=[0, 1, 1000000], dim=8):")
    print(sinusoidal([0, 1, 1_000_000], 8))
    config = json.loads(args.config.read_text()) if args.config else LLAMA_31_8B
    spec = RopeSpec.from_hf_config(config)
    cos, sin = rope_cos_sin([0, 1, 131071], spec)
    print(f"\n{spec}\nrope cos[:, :6] at positions 0, 1, 131071:")
    print(cos[:, :6])
    print("\nalibi_slopes(12) (paper order, non-power-of-2):")
    print(alibi_slopes(12))
    print("\nt5_relative_position_bucket([-200, -20, -3, 0, 3, 20, 200]):")
    print(t5_relative_position_bucket(np.array([-200, -20, -3, 0, 3, 20, 200])))
    return 0
