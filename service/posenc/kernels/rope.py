"""Rotate q/k by precomputed float64 cos/sin (attention factor and xPos already folded in).

Rounded exactly as the native rope_rotate (fma(-b, sin, a*cos), fma(a, sin, b*cos)), so a
call gives the same bits on numba and every native path."""

from .. import numba_cache  # noqa: F401  before any kernel below is decorated: a cache dir for any user
import numba as nb

import numpy as np

from .crmath import cr_log_dd, cr_pow_from_log
from .trig import fma


@nb.njit(nogil=True, cache=True)
def rope_rotate_rows(x, cos, sin, interleaved, out, lo, hi):
    """x, out [B, n, D]; cos, sin [n, n_freq] float64. Rotates pairs (i, i+n_freq) or
    (2i, 2i+1) of the first 2*n_freq dims for rows lo..hi, copies the rest. Math in float64."""
    batch, _, width = x.shape
    n_freq = cos.shape[1]
    for b in range(batch):
        for r in range(lo, hi):
            for i in range(n_freq):
                ia = 2 * i if interleaved else i
                ib = ia + 1 if interleaved else i + n_freq
                c, s = cos[r, i], sin[r, i]
                xa, xb = float(x[b, r, ia]), float(x[b, r, ib])
                out[b, r, ia] = fma(-xb, s, xa * c)
                out[b, r, ib] = fma(xa, s, xb * c)
            for j in range(2 * n_freq, width):
                out[b, r, j] = x[b, r, j]


@nb.njit(nogil=True, cache=True)
def xpos_decay_rows(zeta, power, out, lo, hi):
    """out[r, i] = zeta_i ** power_r for rows lo..hi, correctly rounded (posenc.crmath): numpy's
    `**` runs SVML on AVX-512 CPUs and libm elsewhere, and glibc's pow differs between CPUs with
    and without FMA, so with either the decay would differ between nodes."""
    logs = np.empty((zeta.shape[0], 2))  # each column's log once, as the native kernel
    for i in range(zeta.shape[0]):
        logs[i, 0], logs[i, 1] = cr_log_dd(zeta[i])
    for r in range(lo, hi):
        for i in range(zeta.shape[0]):
            out[r, i] = cr_pow_from_log(logs[i, 0], logs[i, 1], zeta[i], power[r])
