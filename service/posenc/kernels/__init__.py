"""numba kernels: the code that touches every output element.

Kernels take clean typed arrays and a row range [lo, hi) and never validate (the API layer
did). All are `nogil=True, cache=True`; `parallel.run_rows` splits big jobs across a
thread pool, so there is no numba threading layer to fight with inside a server.
"""

from .. import numba_cache  # noqa: F401  before any kernel module below is decorated: a cache dir for any user
from .alibi import alibi_bias_rows
from .gather import gather_rows, index_span
from .halves import half_midpoint_rows
from .parallel import run_rows, set_threads, threads
from .rope import rope_rotate_rows, xpos_decay_rows
from .t5 import t5_buckets
from .trig import sincos_rows

__all__ = ["alibi_bias_rows", "gather_rows", "half_midpoint_rows", "index_span", "rope_rotate_rows", "run_rows", "set_threads",
           "sincos_rows", "t5_buckets", "threads", "xpos_decay_rows"]
