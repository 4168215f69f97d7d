"""The kernels this process runs: libposenc's through its CPython binding when the native core
is built (posenc.native.BINDING, native/python/_posenc.c), else this package's numba kernels.

Same names, same arguments (the numba signatures: arrays in, rows lo..hi written), same bits
(tests/native/test_binding.py holds the binding to the numba kernels on drawn inputs), so a
caller never sees which ran. On the binding a call costs well under a microsecond whatever
its size, so there is no size below which numba would be faster, and numba is never imported.
`NAME` says which: the native path's name ("avx2", ...) or "numba".
"""

from __future__ import annotations

from .. import native
from .parallel import run_rows

if native.BINDING is not None:
    NAME = native.ACTIVE.name
    alibi_bias_rows = native.BINDING.alibi_bias_rows
    gather_rows = native.BINDING.gather_rows
    half_midpoint_rows = native.BINDING.half_midpoint_rows
    index_span = native.BINDING.index_span
    rope_rotate_rows = native.BINDING.rope_rotate_rows
    sincos_rows = native.BINDING.sincos_rows
    t5_buckets = native.BINDING.t5_buckets
    xpos_decay_rows = native.BINDING.xpos_decay_rows
else:
    NAME = "numba"
    from .alibi import alibi_bias_rows
    from .gather import gather_rows, index_span
    from .halves import half_midpoint_rows
    from .rope import rope_rotate_rows, xpos_decay_rows
    from .t5 import t5_buckets
    from .trig import sincos_rows

__all__ = ["NAME", "alibi_bias_rows", "gather_rows", "half_midpoint_rows", "index_span", "rope_rotate_rows",
           "run_rows", "sincos_rows", "t5_buckets", "xpos_decay_rows"]
