"""llama.cpp's RoPE arithmetic, so the audit can simulate a cache llama.cpp computed.

ggml's CPU rope (ggml-cpu ops.cpp: `ggml_rope_cache_init`, `rope_yarn`, `rope_yarn_ramp`, and
`ggml_rope_yarn_corr_dims` in ggml.c) works in float32 throughout, and differently from HF:

* theta_scale = powf(freq_base, -2.0f / n_dims), rounded to float32 once;
* the angle of frequency 0 is the position itself, and each next one is the previous times
  theta_scale, rounded to float32: frequency i carries i roundings (and i times theta_scale's own
  rounding), so its relative error grows with i, unlike the `p * inv_freq` product frameworks form;
* per frequency, theta / freq_factor (Llama-3's rope_freqs, LongRoPE's factors), times freq_scale
  (1 / factor for linear and YaRN), blended YaRN-style with the unscaled angle by
  ramp_mix = ext_factor * (1 - clamp((i - low) / max(0.001, high - low))), every step in float32;
* cos and sin of that angle times mscale (attn_factor, and YaRN's 1 + 0.1 ln(1 / freq_scale)).

`GgmlRope.for_spec` sets these as llama.cpp runs a converted model of the spec: YaRN with its
ramp (ext_factor 1, the correction dims in float32), linear as freq_scale, every other variant as
freq_factors (the per-frequency divisors the converter writes as a tensor). The amplitude is the
audit's attention factor, like every other simulation's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..encodings import RopeSpec

F32 = np.float32


def correction_dims(n_dims: int, n_ctx_orig: int, base: float, beta_fast: float, beta_slow: float) -> tuple:
    """ggml_rope_yarn_corr_dims: the [low, high] ramp band, every step in float32 (floor/ceil, clamped)."""
    def dim(rotations: float) -> np.float32:
        turns = F32(F32(n_ctx_orig) / (F32(rotations) * F32(2) * F32(math.pi)))
        return F32(F32(n_dims) * F32(math.log(turns)) / (F32(2) * F32(math.log(F32(base)))))
    low, high = math.floor(dim(beta_fast)), math.ceil(dim(beta_slow))
    return F32(max(0, low)), F32(min(n_dims - 1, high))


@dataclass(frozen=True)
class GgmlRope:
    """ggml_rope_ext's frequency parameters for one spec (the amplitude is applied separately)."""

    n_freq: int
    theta_scale: np.float32
    freq_scale: np.float32
    ramp_mix: np.ndarray | None  # float32 [n_freq], ext_factor * ramp; None: ext_factor 0 (no blend)
    freq_factors: np.ndarray | None  # float32 [n_freq] divisors; None: none (all 1)

    @classmethod
    def for_spec(cls, spec: RopeSpec, inv: np.ndarray) -> GgmlRope | None:
        """How llama.cpp runs a model of this spec whose frequencies (as the audit expects them) are `inv`;
        None when llama.cpp has no such rope (M-RoPE, an odd rotary dim)."""
        k = inv.shape[0]
        n_dims = 2 * k
        if spec.mrope_section is not None or k < 1:
            return None
        params = spec.scaling_params
        base = spec.base
        if spec.rope_type in ("ntk", "dynamic"):  # a plain power of the grown base: read it back from inv
            base = float(inv[1]) ** (-n_dims / 2.0) if k > 1 else base
        theta_scale = F32(math.pow(float(F32(base)), float(F32(-2.0) / F32(n_dims))))
        freq_scale, ramp_mix, factors = F32(1.0), None, None
        if spec.rope_type in ("linear", "yarn"):
            freq_scale = F32(1.0 / params["factor"])
        if spec.rope_type == "yarn":
            low, high = correction_dims(n_dims, spec.original_max_position_embeddings or spec.max_position_embeddings,
                                        base, params["beta_fast"], params["beta_slow"])
            y = (np.arange(k, dtype=F32) - low) / max(F32(0.001), F32(high - low))
            ramp_mix = (F32(1) - np.minimum(F32(1), np.maximum(F32(0), y))).astype(F32)
        elif spec.rope_type not in ("default", "linear", "ntk", "dynamic"):
            plain = base ** -(np.arange(k, dtype=np.float64) / k)
            factors = (plain / inv).astype(F32)
        return cls(k, theta_scale, freq_scale, ramp_mix, factors)

    def angles(self, positions: np.ndarray) -> np.ndarray:
        """float32 [n, n_freq]: the angle ggml's rope forms for every position and frequency."""
        theta = np.asarray(positions, dtype=np.float64).astype(F32)
        out = np.empty((theta.shape[0], self.n_freq), dtype=F32)
        for i in range(self.n_freq):
            extrap = theta if self.freq_factors is None else theta / self.freq_factors[i]
            interp = self.freq_scale * extrap
            if self.ramp_mix is None:
                out[:, i] = interp
            else:  # interp * (1 - mix) + extrap * mix, contracted to one fma as compilers do on FMA hardware
                mix = self.ramp_mix[i]
                scaled = (extrap * mix).astype(np.float64)
                out[:, i] = interp.astype(np.float64) * float(F32(1) - mix) + scaled
            theta = theta * self.theta_scale
        return out
