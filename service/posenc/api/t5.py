"""posenc.t5_relative_position_bucket."""

from __future__ import annotations

import numpy as np

from ..args import as_bool, as_int
from ..errors import PosencError
from ..kernels import run_rows, t5_buckets
from ..limits import LIMITS


def t5_relative_position_bucket(relative_position, *, bidirectional=True, num_buckets=32,
                                max_distance=128) -> np.ndarray:
    """T5's bucket for each relative position (key - query), same shape, int64.

    Bidirectional (encoder): half the buckets for keys after the query. Causal (decoder):
    future keys all go to bucket 0. Small distances get exact buckets, larger ones
    logarithmic buckets up to max_distance, beyond which they saturate."""
    try:
        rel = np.asarray(relative_position)
    except (TypeError, ValueError):
        raise PosencError("relative_position", "must be an integer array") from None
    if rel.dtype.kind not in "iu":
        raise PosencError("relative_position", f"must be integers, got dtype {rel.dtype}")
    if rel.dtype.kind == "u" and rel.size and int(rel.max()) > np.iinfo(np.int64).max:
        raise PosencError("relative_position", "must fit in int64")
    bidirectional = as_bool(bidirectional, "bidirectional")
    num_buckets = as_int(num_buckets, "num_buckets", minimum=4 if bidirectional else 2, maximum=LIMITS.max_dim)
    exact = (num_buckets // 2 if bidirectional else num_buckets) // 2
    max_distance = as_int(max_distance, "max_distance", minimum=exact + 1, maximum=2**62)
    LIMITS.check_output(rel.shape, 8, field="relative_position")
    flat = np.ascontiguousarray(rel, dtype=np.int64).reshape(-1)
    out = np.empty_like(flat)
    run_rows(t5_buckets, flat.shape[0], 1, flat, bool(bidirectional), num_buckets, max_distance, out)
    return out.reshape(rel.shape)
