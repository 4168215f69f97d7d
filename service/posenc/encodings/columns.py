"""Where a table's sin/cos values go: the layout contract between specs and the trig kernel."""

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ColumnPlan:
    """Row r, frequency i: interleaved puts sin at r*row_stride + 2i and cos at +1; blocks put
    sin at r*row_stride + sin_base + i and cos at r*row_stride + cos_base + i. Only the first
    n_cos frequencies have a cos column (odd dims end with a lone sin)."""

    row_stride: int
    sin_base: int
    cos_base: int
    interleaved: bool
    n_cos: int

    def sources(self, n_sin: int, width: int) -> tuple[np.ndarray, np.ndarray]:
        """Per column of a [n, width] row (row_stride == width): the frequency index it holds (-1:
        none, e.g. t2t's zero column) and whether it is that frequency's cos."""
        freq, cosine = np.full(width, -1, dtype=np.int64), np.zeros(width, dtype=bool)
        i = np.arange(n_sin)
        sin_col = 2 * i if self.interleaved else self.sin_base + i
        cos_col = 2 * i[:self.n_cos] + 1 if self.interleaved else self.cos_base + i[:self.n_cos]
        freq[sin_col], freq[cos_col], cosine[cos_col] = i, i[:self.n_cos], True
        return freq, cosine
