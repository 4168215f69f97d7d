"""posenc.t5_relative_position_bucket and the [heads, q, k] bias T5 attention adds."""

from __future__ import annotations

import numpy as np

from ..args import as_int
from ..errors import PosencError
from ..kernels.active import run_rows, t5_buckets
from ..limits import LIMITS
from ..encodings.t5 import T5BucketSpec


def _spec_of(spec, bidirectional, num_buckets, max_distance) -> T5BucketSpec:
    """The spec given, or one built from the keyword arguments (their defaults: T5's 32 / 128 / encoder)."""
    if spec is None:
        return T5BucketSpec(32 if num_buckets is None else num_buckets,
                            max_distance=128 if max_distance is None else max_distance,
                            bidirectional=True if bidirectional is None else bidirectional)
    if (bidirectional, num_buckets, max_distance) != (None, None, None):
        raise PosencError("spec", "give either a spec or bidirectional / num_buckets / max_distance, not both")
    return T5BucketSpec.coerce(spec)


def t5_relative_position_bucket(relative_position, spec=None, *, bidirectional=None, num_buckets=None,
                                max_distance=None) -> np.ndarray:
    """T5's bucket for each relative position (key - query), same shape, int64.

    `spec` (a T5BucketSpec, e.g. from `posenc.from_hf_config`) or the three keywords (defaults
    32 buckets, max distance 128, bidirectional). Bidirectional (encoder): half the buckets
    for keys after the query. Causal (decoder): future keys all go to bucket 0. Small
    distances get exact buckets, larger ones logarithmic buckets up to max_distance, beyond
    which they saturate."""
    spec = _spec_of(spec, bidirectional, num_buckets, max_distance)
    try:
        rel = np.asarray(relative_position)
    except (TypeError, ValueError):
        raise PosencError("relative_position", "must be an integer array") from None
    if rel.dtype.kind not in "iu" and not (rel.size == 0 and rel.dtype.kind == "f"):  # [] is float64 to numpy
        raise PosencError("relative_position", f"must be integers, got dtype {rel.dtype}")
    if rel.dtype.kind == "u" and rel.size and int(rel.max()) > np.iinfo(np.int64).max:
        raise PosencError("relative_position", "must fit in int64")
    LIMITS.check_output(rel.shape, 8, field="relative_position")
    flat = np.ascontiguousarray(rel, dtype=np.int64).reshape(-1)
    out = np.empty_like(flat)
    run_rows(t5_buckets, flat.shape[0], 1, flat, spec.bidirectional, spec.num_buckets, spec.max_distance, out)
    return out.reshape(rel.shape)


def t5_position_bias(weight, spec, query_length, key_length=None, *, query_offset=0) -> np.ndarray:
    """The bias T5Attention.compute_bias adds to the scores: [n_heads, query_length, key_length].

    `weight` is the checkpoint's relative_attention_bias table [num_buckets, n_heads]; query i
    sits at position query_offset + i (the cache length while decoding), key j at j, and
    (i, j) reads weight[bucket(j - (query_offset + i))]. Returned in weight's dtype."""
    spec = T5BucketSpec.coerce(spec)
    try:
        table = np.asarray(weight)
    except (TypeError, ValueError):
        raise PosencError("weight", "must be a [num_buckets, n_heads] array of numbers") from None
    if table.ndim != 2 or table.shape[0] != spec.num_buckets or table.dtype.kind != "f":
        raise PosencError("weight", f"must be a float [num_buckets={spec.num_buckets}, n_heads] array, "
                          f"got {table.dtype} {list(table.shape)}")
    q = as_int(query_length, "query_length", minimum=1, maximum=LIMITS.max_abs_position)
    k = q if key_length is None else as_int(key_length, "key_length", minimum=1, maximum=LIMITS.max_abs_position)
    offset = as_int(query_offset, "query_offset", minimum=0, maximum=LIMITS.max_abs_position)
    LIMITS.check_output((table.shape[1], q, k), max(table.dtype.itemsize, 8), field="query_length")
    relative = np.arange(k, dtype=np.int64)[None, :] - (np.arange(q, dtype=np.int64)[:, None] + offset)
    return np.ascontiguousarray(table[t5_relative_position_bucket(relative, spec)].transpose(2, 0, 1))
