"""A latency histogram with microsecond resolution (locust's own rounds to whole milliseconds below 100 ms).

HDR-style log-linear buckets over integer microseconds: exact below 1024 us, then 512
buckets per power of two (0.2% relative width), so a P99 of 0.4 ms reads 0.400 ms, not 0 or 1.
Percentiles are reported as the upper edge of their bucket (never optimistic).
"""

from __future__ import annotations

import math
from collections import Counter

_EXACT = 1024  # microseconds recorded exactly
_HALF = _EXACT // 2


def _index(us: int) -> int:
    if us < _EXACT:
        return us
    shift = us.bit_length() - 10
    return _EXACT + (shift - 1) * _HALF + ((us >> shift) - _HALF)


def _upper_us(index: int) -> int:
    """Exclusive upper edge of a bucket, in microseconds."""
    if index < _EXACT:
        return index + 1
    shift, offset = divmod(index - _EXACT, _HALF)
    return (_HALF + offset + 1) << (shift + 1)


class LatencyHistogram:
    def __init__(self):
        self.counts: Counter[int] = Counter()
        self.total = 0
        self.max_us = 0.0

    def record_ms(self, milliseconds: float) -> None:
        us = max(0.0, milliseconds * 1000.0)
        self.counts[_index(int(us))] += 1
        self.total += 1
        self.max_us = max(self.max_us, us)

    def percentile_ms(self, q: float) -> float:
        """The q-th percentile (0 < q <= 100) in milliseconds, nearest rank; NaN when empty."""
        if not self.total:
            return math.nan
        rank = max(1, math.ceil(q / 100.0 * self.total))
        seen = 0
        for index in sorted(self.counts):
            seen += self.counts[index]
            if seen >= rank:  # a bucket's upper edge, but never above the slowest request seen
                return min(_upper_us(index), self.max_us) / 1000.0
        return self.max_us / 1000.0

    def summary(self) -> dict:
        return {"requests": self.total, "max_ms": self.max_us / 1000.0,
                **{f"p{q:g}_ms": self.percentile_ms(q) for q in (50, 90, 99, 99.9)}}
