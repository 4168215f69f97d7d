"""The seqlock accesses of shared memory in numba: the registry's slots (registry.py) and a
segment's state word (segment.py). The fallback of the native binding's (native/python/_posenc.c,
with posenc_shm.h's slot reader), which a process uses when the native core is built; the same
orderings, so either side may write what the other reads.

find(words, name_words) -> (slot, generation): slot NOT_FOUND when no live slot names it, BUSY
when one stayed busy (layout.py); snapshot(words, out) -> whether every slot was read; write_slot(words, slot,
generation, name_words); store_state(words, state); load_state(words) -> state.
"""

from .. import numba_cache  # noqa: F401  before any kernel below is decorated: a cache dir for any user
import numba as nb
import numpy as np

from .atomics import fence_acquire, fence_release, load_acquire, store_release
from .format import STATE_WORD
from .layout import BUSY, CAPACITY, HEADER_WORDS, NAME_WORDS, NOT_FOUND, SLOT_WORDS, SPINS


@nb.njit(nogil=True, cache=True)
def read_slot(words, base, out):
    """Copy slot words [generation, name...] into out under the seqlock; False if it stayed busy."""
    for _ in range(SPINS):
        before = load_acquire(words, base)
        if before & 1:
            continue
        for k in range(out.shape[0]):
            out[k] = words[base + 1 + k]
        fence_acquire()
        if load_acquire(words, base) == before:
            return True
    return False


@nb.njit(nogil=True, cache=True)
def find(words, name_words):
    """(slot, generation) of the live slot holding this name; slot NOT_FOUND or BUSY otherwise."""
    entry = np.empty(1 + NAME_WORDS, np.uint64)
    for slot in range(CAPACITY):
        if not read_slot(words, HEADER_WORDS + slot * SLOT_WORDS, entry):
            return BUSY, np.uint64(0)
        if entry[0] == 0:
            continue
        same = True
        for k in range(NAME_WORDS):
            if entry[1 + k] != name_words[k]:
                same = False
                break
        if same:
            return slot, entry[0]
    return NOT_FOUND, np.uint64(0)


@nb.njit(nogil=True, cache=True)
def snapshot(words, out):
    """Every slot's [generation, name...] into out[CAPACITY, 9]; False if a slot stayed busy."""
    for slot in range(CAPACITY):
        if not read_slot(words, HEADER_WORDS + slot * SLOT_WORDS, out[slot]):
            return False
    return True


@nb.njit(nogil=True, cache=True)
def write_slot(words, slot, generation, name_words):
    """Seqlock write (caller holds the flock): counter odd, fields, counter even."""
    base = HEADER_WORDS + slot * SLOT_WORDS
    counter = words[base] | 1  # an odd counter left by a writer that died mid-update stays odd here
    store_release(words, base, counter)
    fence_release()
    words[base + 1] = generation
    for k in range(NAME_WORDS):
        words[base + 2 + k] = name_words[k]
    store_release(words, base, counter + 1)


@nb.njit(nogil=True, cache=True)
def store_state(words, state):
    store_release(words, STATE_WORD, state)


@nb.njit(nogil=True, cache=True)
def load_state(words):
    return load_acquire(words, STATE_WORD)
