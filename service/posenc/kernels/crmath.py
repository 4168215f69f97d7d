"""posenc.crmath's correctly rounded pow and log inside numba kernels (the xPos decay, T5's float32 log).

The fast path is posenc/crmath/_fast.py itself, compiled: each function there is recompiled
here over a namespace in which its callees are the compiled ones, so numba runs the same
operations as the library (plain float64 arithmetic: numba adds no fast-math and LLVM fuses no
multiply-add), except two_prod, which is one fused multiply-add here (trig.fma) where the library
splits the factors (Dekker): both are the exact product. When the fast path cannot prove its
rounding (about once in 2^25 calls, or a subnormal result) the kernel calls the library's exact
path in object mode.
"""

from types import FunctionType

from .. import numba_cache  # noqa: F401  before any kernel below is decorated: a cache dir for any user
import numba as nb
import numpy as np

from .. import crmath
from ..crmath import _fast
from .trig import fma


@nb.njit(nogil=True, cache=True)
def _two_prod(a, b):
    p = a * b
    return p, fma(a, b, -p)


def _compiled(module, names, given):
    """{name: numba dispatcher} for module's functions `names`, resolving calls among them to the
    compiled versions and to `given` (numba resolves a global when it compiles, from the function's
    namespace)."""
    namespace = dict(vars(module), **given)
    for name in names:
        if name in given:
            continue
        function = getattr(module, name)
        namespace[name] = nb.njit(nogil=True, cache=True)(
            FunctionType(function.__code__, namespace, name, function.__defaults__))
    return {name: namespace[name] for name in names}


_FAST = _compiled(_fast, _fast.JIT_ORDER, {"two_prod": _two_prod})
_pow_from_log = _FAST["pow_from_log"]
_log_fast = _FAST["log_fast"]
#: log(x) as a double-double (posenc.crmath._fast.log_dd), for kernels that take a column's log once.
cr_log_dd = _FAST["log_dd"]


@nb.njit(cache=True)
def _exact(x, y, which, bits):
    """The exact path, in object mode (it takes the GIL: only this rare call, not the kernel):
    which 0 pow, 1 log, 2 pow with a non-finite exponent (math.pow's exact special values)."""
    with nb.objmode(value="float64"):
        value = (crmath.pow_value(x, y, bits) if which == 0 else crmath.log_value(x, bits) if which == 1
                 else crmath.pow(x, y))
    return value


@nb.njit(nogil=True, cache=True)
def cr_pow_from_log(lh, ll, x, y):
    """x ** y correctly rounded from cr_log_dd(x) = (lh, ll), finite x > 0, any y."""
    if not np.isfinite(y):
        return _exact(x, y, 2, 53)
    value, ok = _pow_from_log(lh, ll, y, 53)
    return value if ok else _exact(x, y, 0, 53)


@nb.njit(nogil=True, cache=True)
def cr_log(x):
    """log(x) correctly rounded, finite x > 0."""
    value, ok = _log_fast(x, 53)
    return value if ok else _exact(x, 0.0, 1, 53)


@nb.njit(nogil=True, cache=True)
def cr_logf(x):
    """log(x) rounded once to float32 (as a float64 holding it), finite x > 0."""
    value, ok = _log_fast(x, 24)
    return value if ok else _exact(x, 0.0, 1, 24)
