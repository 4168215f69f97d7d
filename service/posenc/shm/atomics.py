"""Acquire loads and release stores on shared-memory arrays, for numba code.

A segment's READY flag and the registry's seqlock counters are read by other processes
while this one writes: the flag must become visible only after the data it guards. On
x86-64 (TSO) plain stores already are ordered, but the compiler and weakly ordered CPUs
(ARM64) need the explicit acquire/release orderings these intrinsics emit.
"""

from __future__ import annotations

from .. import numba_cache  # noqa: F401  before any kernel below is decorated: a cache dir for any user
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


def _element_pointer(context, builder, array_type, array, index_type, index):
    ary = context.make_array(array_type)(context, builder, array)
    idx = context.cast(builder, index, index_type, types.intp)
    return cgutils.get_item_pointer(context, builder, array_type, ary, [idx], wraparound=False)


@intrinsic
def load_acquire(typingctx, array, index):
    """array[index] read with acquire ordering: later reads cannot move before it."""
    def codegen(context, builder, signature, args):
        ptr = _element_pointer(context, builder, signature.args[0], args[0], signature.args[1], args[1])
        return builder.load_atomic(ptr, "acquire", array.dtype.bitwidth // 8)

    return array.dtype(array, index), codegen


@intrinsic
def store_release(typingctx, array, index, value):
    """array[index] = value with release ordering: earlier writes are visible before it."""
    def codegen(context, builder, signature, args):
        ptr = _element_pointer(context, builder, signature.args[0], args[0], signature.args[1], args[1])
        val = context.cast(builder, args[2], signature.args[2], array.dtype)
        builder.store_atomic(val, ptr, "release", array.dtype.bitwidth // 8)
        return context.get_dummy_value()

    return types.void(array, index, value), codegen


def _fence(ordering: str, doc: str):
    @intrinsic
    def fence(typingctx):
        def codegen(context, builder, signature, args):
            builder.fence(ordering)
            return context.get_dummy_value()

        return types.void(), codegen

    fence.__doc__ = doc
    return fence


fence_acquire = _fence("acquire", "Reads before the fence complete before any read after it (seqlock read side).")
fence_release = _fence("release", "Writes before the fence become visible before any write after it (seqlock write).")
