"""RoPE cos/sin and rotation as HF writes them (rotate_half / rotate_every_two), in float64."""

import numpy as np


def rope_cos_sin(positions, inv_freq, attention_factor=1.0):
    angle = np.outer(np.asarray(positions, dtype=np.float64), inv_freq)
    return np.cos(angle) * attention_factor, np.sin(angle) * attention_factor


def mrope_cos_sin(positions, inv_freq, mrope_section, attention_factor=1.0):
    """Qwen2-VL M-RoPE: cos/sin per axis of [3, n] positions, then chunk i of the frequencies
    (split by mrope_section) from axis i % 3, as HF's recomposition_frequencies."""
    positions = np.asarray(positions, dtype=np.float64)
    per_axis = [rope_cos_sin(row, inv_freq, attention_factor) for row in positions]
    cuts = np.cumsum(mrope_section)[:-1]

    def recompose(which):
        chunks = [np.split(per_axis[a][which], cuts, axis=-1) for a in range(3)]
        return np.concatenate([chunks[i % 3][i] for i in range(len(mrope_section))], axis=-1)

    return recompose(0), recompose(1)


def xpos_scale(positions, n_freq, rotary_dim, scale_base, center=0.0):
    """xPos decay (Sun et al. 2022): zeta_i^((p - center)/scale_base), zeta_i = (2i + 0.4 d)/(1.4 d)."""
    zeta = (np.arange(0, 2 * n_freq, 2, dtype=np.float64) + 0.4 * rotary_dim) / (1.4 * rotary_dim)
    power = (np.asarray(positions, dtype=np.float64) - center) / scale_base
    return zeta[None, :] ** power[:, None]


def _rotate_half(x):
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def _rotate_every_two(x):
    out = np.empty_like(x)
    out[..., 0::2] = -x[..., 1::2]
    out[..., 1::2] = x[..., 0::2]
    return out


def rope_apply(x, cos, sin, layout="half"):
    """x [..., n, D]; cos/sin [n, n_freq]; rotates the first 2*n_freq dims, passes the rest."""
    x = np.asarray(x, dtype=np.float64)
    width = 2 * cos.shape[-1]
    rot, rest = x[..., :width], x[..., width:]
    if layout == "half":
        c, s = np.concatenate([cos, cos], axis=-1), np.concatenate([sin, sin], axis=-1)
        out = rot * c + _rotate_half(rot) * s
    else:
        c, s = np.repeat(cos, 2, axis=-1), np.repeat(sin, 2, axis=-1)
        out = rot * c + _rotate_every_two(rot) * s
    return np.concatenate([out, rest], axis=-1)
