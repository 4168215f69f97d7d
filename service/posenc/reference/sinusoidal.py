"""Sinusoidal absolute encodings, float64, no scaling (DistilBERT/XLM, Marian, tensor2tensor)."""

import math

import numpy as np


def sinusoidal(positions, dim, *, base=10000.0, layout="interleaved", min_timescale=1.0, max_timescale=None):
    p = np.asarray(positions, dtype=np.float64)[:, None]
    if layout == "interleaved":  # DistilBERT create_sinusoidal_embeddings
        j = np.arange(dim)
        angle = p / np.power(base, 2 * (j // 2) / dim)
        return np.where(j % 2 == 0, np.sin(angle), np.cos(angle))
    if layout == "halves":  # Marian create_weight: sin of even j, cos of odd j
        j = np.arange(dim)
        angle = p / np.power(base, 2 * (j // 2) / dim)
        return np.concatenate([np.sin(angle[:, 0::2]), np.cos(angle[:, 1::2])], axis=1)
    if layout == "t2t":  # tensor2tensor get_timing_signal_1d
        max_timescale = base if max_timescale is None else max_timescale
        num_timescales = dim // 2
        log_inc = math.log(max_timescale / min_timescale) / max(num_timescales - 1, 1)
        inv_timescales = min_timescale * np.exp(np.arange(num_timescales) * -log_inc)
        scaled = p * inv_timescales[None, :]
        signal = np.concatenate([np.sin(scaled), np.cos(scaled)], axis=1)
        return np.pad(signal, [[0, 0], [0, dim % 2]])
    raise ValueError(layout)
