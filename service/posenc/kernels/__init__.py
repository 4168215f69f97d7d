"""The code that touches every output element.

One module per kernel, in numba: the portable fallback, and the oracle the native kernels
are tested against. Kernels take clean typed arrays and a row range [lo, hi) and never
validate (the API layer did). All are `nogil=True, cache=True`; `parallel.run_rows` splits
big jobs across a thread pool, so there is no numba threading layer to fight with inside a
server.

What a process runs is `active`: libposenc's kernels through the CPython binding when the
native core is built (the same names, arguments and bits), else these. Nothing here imports
numba until a numba kernel is asked for, so a process on the native kernels never loads it
(about a second of a server's start, docs/startup.md).
"""

from .._lazy import lazy_exports

#: ALiBi modes, as posenc.h's POSENC_ALIBI_* and the kernels' `mode` argument.
MODES = {"causal": 0, "symmetric": 1, "bloom": 2}

__all__ = ["alibi_bias_rows", "gather_rows", "half_midpoint_rows", "index_span", "rope_rotate_rows",
           "run_rows", "set_threads", "sincos_rows", "t5_buckets", "threads", "xpos_decay_rows"]

__getattr__, __dir__ = lazy_exports(__name__, {
    "alibi_bias_rows": "alibi", "gather_rows": "gather", "half_midpoint_rows": "halves",
    "index_span": "gather", "rope_rotate_rows": "rope", "run_rows": "parallel", "set_threads": "parallel",
    "sincos_rows": "trig", "t5_buckets": "t5", "threads": "parallel", "xpos_decay_rows": "rope"},
    submodules=("active", "alibi", "gather", "halves", "parallel", "rope", "t5", "trig"))
