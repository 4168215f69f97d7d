"""ALiBi slopes and biases, ported from the reference code (paper repo, BLOOM, MPT)."""

import math

import numpy as np


def paper_slopes(n):
    """ofirpress/attention_with_linear_biases get_slopes, verbatim in structure (Python floats)."""

    def power_of_2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + paper_slopes(2 * closest)[0::2][: n - closest]


def bloom_slopes(n):
    """BLOOM _get_alibi_slopes: float32 base raised to int powers in float32."""
    closest = 2 ** math.floor(math.log2(n))
    base = np.float32(2 ** (-(2 ** -(math.log2(closest) - 3))))
    slopes = [np.power(base, np.float32(k), dtype=np.float32) for k in range(1, 1 + closest)]
    if closest != n:
        extra_base = np.float32(2 ** (-(2 ** -(math.log2(2 * closest) - 3))))
        remaining = min(closest, n - closest)
        slopes += [np.power(extra_base, np.float32(k), dtype=np.float32) for k in range(1, 1 + 2 * remaining, 2)]
    return [float(s) for s in slopes]


def mpt_slopes(n, alibi_bias_max=8):
    """MPT build_mpt_alibi_tensor: next power of two, float32, odd-then-even reorder."""
    p = 2 ** math.ceil(math.log2(n))
    base = np.arange(1, p + 1, dtype=np.float32) * np.float32(alibi_bias_max / p)
    slopes = np.float32(1.0) / np.power(np.float32(2.0), base, dtype=np.float32)
    if p != n:
        slopes = np.concatenate([slopes[1::2], slopes[0::2]])[:n]
    return [float(s) for s in slopes]


def alibi_slopes(n, variant="paper", alibi_bias_max=8):
    if variant == "paper":
        return np.array(paper_slopes(n))
    if variant == "bloom":
        return np.array(bloom_slopes(n))
    if variant == "mpt":
        return np.array(mpt_slopes(n, alibi_bias_max))
    raise ValueError(variant)


def alibi_bias(slopes, q_positions, k_positions, mode="causal"):
    """[h, q, k] float64: causal -m(i-j) with -inf for j>i; symmetric -m|i-j|; bloom m*j."""
    m = np.asarray(slopes, dtype=np.float64)[:, None, None]
    i = np.asarray(q_positions, dtype=np.float64)[None, :, None]
    j = np.asarray(k_positions, dtype=np.float64)[None, None, :]
    if mode == "causal":
        return np.where(j <= i, -m * (i - j), -np.inf)
    if mode == "symmetric":
        return -m * np.abs(i - j)
    if mode == "bloom":
        return np.broadcast_to(m * j, (m.shape[0], i.shape[1], j.shape[2])).copy()
    raise ValueError(mode)
