"""Where numba caches posenc's compiled kernels when numba itself finds nowhere.

Every kernel is `@njit(cache=True)`, and numba picks the cache directory when the kernel is
decorated, at import: `NUMBA_CACHE_DIR`, else the package's own `__pycache__`, else
`~/.cache/numba`. A process running as another user than the one who installed posenc (a
shm reader under its own uid, with no writable home) has none of them, and numba then
refuses to import the kernels at all ("cannot cache function ...: no locator available").
This module adds one last place, tried only after numba's own: a per-user directory under
the system temporary directory, `posenc-numba-<uid>`, created mode 0700. Cache files are
pickles that numba loads and runs, so a directory there that is not ours (another user
may create the name first), is a symlink or that others may write is never used: the
process then caches in a private directory of its own, removed when it exits.

Importing this module registers the locator; every module that defines numba kernels imports it
first (posenc/kernels/*.py, shm/seqlock.py, shm/crc32c_numba.py, shm/atomics.py), and only those
import numba at all: a process on the native kernels (posenc.kernels.active) loads neither.
`NUMBA_CACHE_DIR`, when set, still wins, as numba documents.
"""

from __future__ import annotations

import atexit
import os
import shutil
import stat
import tempfile

from numba.core import caching

_CacheImpl = getattr(caching, "CacheImpl", None) or caching._CacheImpl  # _CacheImpl in older numba
_directory: str | None = None


def per_user_directory() -> str | None:
    """The base directory this process caches kernels in when numba has no other: the shared
    per-user one if it is safe to load pickles from, else a private one for this process;
    None when no temporary directory is writable (numba then says it has no locator)."""
    global _directory
    if _directory is None:
        try:
            shared = os.path.join(tempfile.gettempdir(), f"posenc-numba-{os.getuid()}")
            try:
                os.mkdir(shared, 0o700)
            except FileExistsError:
                pass
            if _private(shared):
                _directory = shared
            else:
                _directory = tempfile.mkdtemp(prefix="posenc-numba-")
                atexit.register(shutil.rmtree, _directory, True)
        except OSError:  # no writable temporary directory at all (gettempdir raises FileNotFoundError)
            return None
    return _directory


def _private(path: str) -> bool:
    """A real directory (not a symlink) owned by this user that no one else may write."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022


class PerUserCacheLocator(caching._SourceFileBackedLocatorMixin, caching._CacheLocator):
    """numba's last resort for a kernel's cache: `per_user_directory()`, one subdirectory per
    source directory as numba's own user-wide locator does."""

    def __init__(self, py_func, py_file):
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        self._cache_path = os.path.join(per_user_directory(), self.get_suitable_cache_subpath(py_file))

    def get_cache_path(self) -> str:
        return self._cache_path

    @classmethod
    def from_function(cls, py_func, py_file):
        if per_user_directory() is None:
            return None
        return super().from_function(py_func, py_file)


if PerUserCacheLocator not in _CacheImpl._locator_classes:
    _CacheImpl._locator_classes.append(PerUserCacheLocator)
