"""The registry file's layout (docs/shm-format.md; POSENC_SHM_REGISTRY_* in posenc_shm.h), in
one place for the registry and the numba fallback of its seqlock (seqlock.py)."""

from .paths import NAME_MAX

MAGIC = b"POSENCRG"
VERSION = 1
CAPACITY = 1024
HEADER_BYTES = 128
SLOT_BYTES = 128
SIZE = HEADER_BYTES + CAPACITY * SLOT_BYTES
HEADER_WORDS = HEADER_BYTES // 8
SLOT_WORDS = SLOT_BYTES // 8
NAME_WORDS = NAME_MAX // 8
#: Spins on one slot before a reader gives up and sleeps (a writer holds a slot odd for nanoseconds).
SPINS = 100_000
#: The slot a lookup returns when no live slot names the table, or when a slot stayed busy
#: (native/python/_posenc.c's registry_find returns the same codes).
NOT_FOUND, BUSY = -1, -2
