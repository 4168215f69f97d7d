"""A bounded cache of cos/sin tables on a device: positions 0..L-1 for one (spec, seq_len, device,
dtype, arrangement), so repeated forwards index rows instead of recomputing them.

Bounded in bytes (least recently used entries go first) and in rows: a table longer than
`max_rows` is never cached, those calls compute their rows directly.
"""

from __future__ import annotations

from collections import OrderedDict

import torch


class CosSinCache:
    def __init__(self, *, max_bytes: int = 256 << 20, max_rows: int = 1 << 20):
        self.max_bytes = max_bytes
        self.max_rows = max_rows
        self._entries: OrderedDict[tuple, tuple[torch.Tensor, torch.Tensor]] = OrderedDict()
        self._bytes = 0

    @staticmethod
    def length_for(max_position: int) -> int:
        """Cache length covering max_position: the next power of two, at least 1024 rows."""
        return max(1024, 1 << int(max_position).bit_length())

    def get(self, key: tuple, build):
        """The (cos, sin) table for key, from `build()` on a miss (None when it may not be cached)."""
        hit = self._entries.get(key)
        if hit is not None:
            self._entries.move_to_end(key)
            return hit
        cos, sin = build()
        size = cos.numel() * cos.element_size() * 2
        if size > self.max_bytes:
            return cos, sin
        while self._entries and self._bytes + size > self.max_bytes:
            _, (old_cos, old_sin) = self._entries.popitem(last=False)
            self._bytes -= old_cos.numel() * old_cos.element_size() * 2
        self._entries[key] = (cos, sin)
        self._bytes += size
        return cos, sin

    def clear(self) -> None:
        self._entries.clear()
        self._bytes = 0

    @property
    def nbytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)
