"""Row gather from a table (shared-memory lookups and table-backed requests)."""

import numba as nb


@nb.njit(nogil=True, cache=True)
def gather_rows(table, rows, out, lo, hi):
    """out[k] = table[rows[k]] for k in lo..hi; rows already bounds-checked by the caller."""
    width = table.shape[1]
    for k in range(lo, hi):
        src = rows[k]
        for j in range(width):
            out[k, j] = table[src, j]
