"""T5 relative-position buckets, with the float32 log the reference uses.

The reference (transformers' T5Attention) takes torch's float32 log of r / max_exact and
divides by float32(math.log(max_distance / max_exact)). Here both logs are correctly rounded
(posenc.crmath; the float32 one rounded once from the exact value), so a bucket does not depend
on the C library or the CPU; torch's float32 log is within an ulp of it, and the goldens check
the buckets against T5's own module."""

from .. import numba_cache  # noqa: F401  before any kernel below is decorated: a cache dir for any user
import numba as nb
import numpy as np

from .crmath import cr_log, cr_logf


@nb.njit(nogil=True, cache=True)
def t5_buckets(rel, bidirectional, num_buckets, max_distance, out, lo, hi):
    n = num_buckets // 2 if bidirectional else num_buckets
    max_exact = n // 2
    denom = np.float32(cr_log(max_distance / max_exact))
    span = np.float32(n - max_exact)
    for k in range(lo, hi):
        r = rel[k]
        bucket = 0
        if bidirectional:
            if r > 0:
                bucket = n
            r = abs(r)
        else:
            r = -min(r, 0)
        if r < max_exact:
            out[k] = bucket + r
        else:
            scaled = np.float32(cr_logf(np.float64(np.float32(r) / np.float32(max_exact)))) / denom * span
            out[k] = bucket + min(max_exact + int(scaled), n - 1)
