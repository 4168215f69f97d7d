"""Row gather from a table (shared-memory lookups and table-backed requests)."""

from .. import numba_cache  # noqa: F401  before any kernel below is decorated: a cache dir for any user
import numba as nb


@nb.njit(nogil=True, cache=True)
def gather_rows(table, rows, out, lo, hi):
    """out[k] = table[rows[k]] for k in lo..hi; rows already bounds-checked by the caller."""
    width = table.shape[1]
    for k in range(lo, hi):
        src = rows[k]
        for j in range(width):
            out[k, j] = table[src, j]


@nb.njit(nogil=True, cache=True)
def index_span(values):
    """(least, greatest) of a non-empty integer array in one pass (numpy's min() and max() are two
    passes and ~2 us of call overhead each, more than a request's whole gather of 64 rows)."""
    lo = hi = values[0]
    for v in values:
        if v < lo:
            lo = v
        elif v > hi:
            hi = v
    return lo, hi
