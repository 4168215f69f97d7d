"""`T5BucketSpec`: how T5-style attention maps a relative position (key - query) to a bucket.

The bias values themselves are learned (an embedding of [num_buckets, n_heads] in the
checkpoint); the spec is the deterministic part: the bucketing every T5 / mT5 / UMT5 layer
applies before that lookup. Encoders are bidirectional (half the buckets for keys after the
query), decoders unidirectional (keys after the query all fall in bucket 0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..args import as_int
from ..errors import PosencError
from ..limits import LIMITS
from .canonical import Canonical


@dataclass(frozen=True, init=False)
class T5BucketSpec(Canonical):
    KIND = "t5"
    POSITIONAL = "num_buckets"
    KEYWORDS = ("max_distance", "bidirectional")

    num_buckets: int
    max_distance: int
    bidirectional: bool

    def __init__(self, num_buckets=32, *, max_distance=128, bidirectional=True):
        if not isinstance(bidirectional, (bool, np.bool_)):
            raise PosencError("bidirectional", f"must be true or false, got {bidirectional!r}")
        bidirectional = bool(bidirectional)
        # At least one exact bucket, and a log range above it (the reference divides by log(max_distance/exact)).
        num_buckets = as_int(num_buckets, "num_buckets", minimum=4 if bidirectional else 2, maximum=LIMITS.max_dim)
        max_distance = as_int(max_distance, "max_distance", minimum=self.exact_buckets_for(num_buckets, bidirectional) + 1,
                              maximum=LIMITS.max_abs_position)
        object.__setattr__(self, "num_buckets", num_buckets)
        object.__setattr__(self, "max_distance", max_distance)
        object.__setattr__(self, "bidirectional", bidirectional)

    @staticmethod
    def exact_buckets_for(num_buckets: int, bidirectional: bool) -> int:
        """Distances below this get a bucket each (max_exact in the reference)."""
        return (num_buckets // 2 if bidirectional else num_buckets) // 2

    @property
    def exact_buckets(self) -> int:
        return self.exact_buckets_for(self.num_buckets, self.bidirectional)

    def to_dict(self) -> dict:
        return {"kind": self.KIND, "num_buckets": self.num_buckets, "max_distance": self.max_distance,
                "bidirectional": self.bidirectional}
