"""ALiBi bias blocks from slopes and query/key positions."""

from .. import numba_cache  # noqa: F401  before any kernel below is decorated: a cache dir for any user
import numba as nb
import numpy as np

from . import MODES  # noqa: F401  the `mode` codes, re-exported beside the kernel that reads them


@nb.njit(nogil=True, cache=True)
def alibi_bias_rows(slopes, q_pos, k_pos, mode, out, lo, hi):
    """out[h, a, b] for query rows lo..hi: causal -m(i-j) (-inf for j>i), symmetric -m|i-j|, bloom m*j."""
    for h in range(slopes.shape[0]):
        m = slopes[h]
        for a in range(lo, hi):
            i = q_pos[a]
            for b in range(k_pos.shape[0]):
                j = k_pos[b]
                if mode == 0:
                    out[h, a, b] = -m * (i - j) if j <= i else -np.inf
                elif mode == 1:
                    out[h, a, b] = -m * abs(i - j)
                else:
                    out[h, a, b] = m * j
