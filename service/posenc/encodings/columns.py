"""Where a table's sin/cos values go: the layout contract between specs and the trig kernel."""

from dataclasses import dataclass


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
