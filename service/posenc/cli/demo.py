"""`posenc demo`: print a few encodings, to see at a glance that everything works.

`posenc demo --model-config CONFIG` is `posenc positions CONFIG --positions 0,1,4096`: a model's own
values are that command's job (every layer type, any positions), so demo hands over to it."""

from __future__ import annotations

from . import positions
from .options import add_flag

#: The positions `demo --model-config` shows.
CONFIG_POSITIONS = "0,1,4096"
LLAMA_31_8B = {
    "model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
}


def register(sub) -> None:
    p = sub.add_parser("demo", help="print a few encodings")
    add_flag(p, "--model-config", old=("--config",), metavar="CONFIG", help="a model's config.json (or its "
             f"directory): the same as `posenc positions CONFIG --positions {CONFIG_POSITIONS}`, which takes "
             "more options")
    p.set_defaults(handler=run)


def run(args) -> int:
    if args.model_config is not None:
        return positions.run(positions.parsed([args.model_config, f"--positions={CONFIG_POSITIONS}"]))
    import numpy as np

    from .. import RopeSpec, alibi_slopes, rope_cos_sin, sinusoidal, t5_relative_position_bucket

    np.set_printoptions(precision=6, suppress=True, linewidth=110)
    print("sinusoidal(positions=[0, 1, 1000000], dim=8):")
    print(sinusoidal([0, 1, 1_000_000], 8))
    spec = RopeSpec.from_hf_config(LLAMA_31_8B)
    cos, sin = rope_cos_sin([0, 1, 131071], spec)
    print(f"\n{spec}\nrope cos[:, :6] at positions 0, 1, 131071:")
    print(cos[:, :6])
    print("\nalibi_slopes(12) (paper order, non-power-of-2):")
    print(alibi_slopes(12))
    print("\nt5_relative_position_bucket([-200, -20, -3, 0, 3, 20, 200]):")
    print(t5_relative_position_bucket(np.array([-200, -20, -3, 0, 3, 20, 200])))
    print("\nA model's own values: posenc positions CONFIG --positions 0,1,4096 (CONFIG: its config.json)")
    return 0
