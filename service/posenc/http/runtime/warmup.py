"""Run every kernel signature a request can reach once on tiny input, so no request pays a JIT compile.

numba compiles one machine-code version per argument-type combination; `cache=True` makes the
first call in a process a cache load (milliseconds) once any process has compiled it. The
service calls `warm_kernels` in the parent before the workers start (so they do not all
compile at once) and again in each worker before it reports ready.
"""

from __future__ import annotations

import numpy as np

from ... import api
from ...dtypes import OUTPUT_DTYPES, midpoint_rows
from ...kernels.active import index_span

#: Output dtypes whose kernels differ (float16/bfloat16 are computed through float64).
_KERNEL_DTYPES = ("float32", "float64")


def warm_kernels() -> None:
    positions = np.arange(4)
    spec = {"head_dim": 8}
    for dtype in _KERNEL_DTYPES:
        api.sinusoidal(positions, 8, dtype=dtype)
        api.rope_cos_sin(positions, spec, dtype=dtype)
        api.rope_table(positions, spec, dtype=dtype)
        api.rope_apply(np.zeros((4, 8), dtype=dtype), positions, spec)
        api.alibi_bias(2, 3, dtype=dtype)
    api.rope_inv_freq(spec)
    api.alibi_slopes(3)
    api.t5_relative_position_bucket(np.arange(-3, 3))
    index_span(np.frombuffer(np.arange(3, dtype="<i8").tobytes(), "<i8"))  # raw bodies: read-only int64
    rows = np.zeros((1, 4), np.float32)
    for dtype in ("float16", "bfloat16"):  # 16-bit rows from float32 tables: gathered copies, mapped views
        midpoint_rows(rows, OUTPUT_DTYPES[dtype])
        midpoint_rows(np.frombuffer(rows.tobytes(), np.float32).reshape(1, 4), OUTPUT_DTYPES[dtype])


def warm_lookups(tables) -> None:
    """One gather per attached table (each table dtype is its own gather signature)."""
    for table in tables:
        table.lookup(np.array([table.start], dtype=np.int64))
