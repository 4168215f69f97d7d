"""TableCache.covering remembers which tables could answer a spec; that memory must follow the tables:
a table replaced (a wider range), removed or newly attached changes the answer at once."""

import shutil
import tempfile

import numpy as np
import pytest
from posenc.http.pipeline.budget import MemoryBudget
from posenc.http.runtime.caches import ByteCache
from posenc.http.runtime.table_cache import TableCache, spec_key
from posenc.shm import TableStore
from posenc.tables import TableSpec

F32 = np.dtype(np.float32)


def _spec(stop: int, dim: int = 8) -> TableSpec:
    return TableSpec.from_dict({"encoding": {"kind": "sinusoidal", "dim": dim}, "start": 0, "stop": stop,
                                "dtype": "float32"})


@pytest.fixture
def store():
    root = tempfile.mkdtemp(prefix="posenc-table-cache-", dir="/dev/shm")
    store = TableStore(root)
    yield store
    store.close()
    shutil.rmtree(root, ignore_errors=True)


def test_covering_follows_replacements_removals_and_attachments(store):
    store.publish("sin8", _spec(10))
    cache = TableCache(store.root, ByteCache(MemoryBudget(1 << 20), 1 << 16))
    key = spec_key(_spec(10))
    near, far = np.array([5.0]), np.array([50.0])
    assert cache.covering(key, near, F32) is None  # nothing attached yet
    cache.attach("sin8")
    assert cache.covering(key, near, F32).stop == 10 and cache.covering(key, far, F32) is None
    store.publish("sin8", _spec(100))  # replaced by a wider table: the next refresh swaps it in
    cache.apply(cache.scan())
    assert cache.covering(key, far, F32).stop == 100
    store.remove("sin8")
    cache.forget("sin8")  # as a DELETE does: after the registry let go of it
    assert cache.covering(key, near, F32) is None
    store.publish("other", _spec(20, dim=16))
    cache.attach("other")
    assert cache.covering(key, near, F32) is None  # another encoding never stands in
    assert cache.covering(spec_key(_spec(20, dim=16)), near, F32).name == "other"
    assert cache.covering(spec_key(_spec(20, dim=16)), near, np.dtype(np.float64)) is None  # wider than stored
