"""The goldens tests/golden/generate_bias.py stores (model_other.npz), read with numpy only,
and the tolerance for comparing posenc's exact values with transformers' float32 ones."""

import json
from functools import lru_cache
from pathlib import Path

import numpy as np

import posenc
from conftest import hf_config

GOLDEN = Path(__file__).parent / "golden" / "model_other.npz"


@lru_cache(maxsize=1)
def _load():
    with np.load(GOLDEN, allow_pickle=False) as z:
        return json.loads(str(z["meta"])), {k: z[k] for k in z.files if k != "meta"}


def meta(name: str) -> dict:
    return _load()[0][name]


def array(name: str) -> np.ndarray:
    return _load()[1][name]


def model(name: str) -> posenc.ModelPositions:
    """posenc's reading of a fixture config."""
    return posenc.from_hf_config(hf_config(name))


def float32_angle_tolerance(angle_max) -> np.ndarray:
    """|exact - transformers| for cos/sin whose angle transformers forms in float32: the angle
    (position * float32 frequency) carries up to |angle| * 2**-23 of rounding, the result one
    float32 rounding more. `angle_max` broadcasts against the values (per row or element)."""
    return np.asarray(angle_max, dtype=np.float64) * 2.0**-22 + 2.0**-23
