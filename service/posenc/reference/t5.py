"""T5Attention._relative_position_bucket, with its float32 log, one element at a time."""

import math

import numpy as np


def t5_relative_position_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    rel = np.asarray(relative_position, dtype=np.int64)
    out = np.empty(rel.shape, dtype=np.int64)
    for idx, r in np.ndenumerate(rel):
        r, n, bucket = int(r), num_buckets, 0
        if bidirectional:
            n //= 2
            bucket += n if r > 0 else 0
            r = abs(r)
        else:
            r = -min(r, 0)
        max_exact = n // 2
        if r < max_exact:
            out[idx] = bucket + r
            continue
        log_ratio = np.log(np.float32(r) / np.float32(max_exact))  # float32, as torch
        scaled = log_ratio / np.float32(math.log(max_distance / max_exact)) * np.float32(n - max_exact)
        out[idx] = bucket + min(max_exact + int(scaled), n - 1)
    return out
