"""`posenc bench shm`'s publish rows run end to end on a small table: every stage, the
publishes into prepared segments, every native CRC-32C kernel and every floor of the C helper produce a time, and the benchmark
leaves nothing behind in the directory it measures. (Times only, never a speed.)"""

import math
import os
import shutil

import pytest
from posenc.bench.shm_publish import FLOORS, publish_rows
from posenc.encodings import SinusoidalSpec
from posenc.shm import checksum
from posenc.tables import TableSpec

pytest_plugins = ["shm_support"]


def test_publish_rows_time_every_stage_kernel_and_floor(shm_root):
    rows = dict(publish_rows(shm_root, TableSpec(SinusoidalSpec(16), 0, 40_000), repeats=1, parallel=2))
    assert all(seconds > 0 and math.isfinite(seconds) for seconds in rows.values()), rows
    assert "`TableStore.publish`, CRC-32C (the default)" in rows
    assert any(label.startswith("stage: create, header, READY, registry flip") for label in rows)
    for prepared in ("`TableStore.prepare`: ", "`TableStore.publish` into a prepared segment, CRC-32C, 2 threads",
                     "`TableStore.publish` into a prepared segment, CRC-32C, 1 thread", "after it: unmap",
                     "stage, prepared, 1 thread: compute", "stage, prepared, 1 thread: CRC-32C",
                     "stage, prepared, 1 thread: the rows and their CRC-32C in one pass",
                     "stage: the rows and their CRC-32C in one pass", "sum of the stages a CRC-32C publish runs"):
        assert any(label.startswith(prepared) for label in rows), prepared
    slower = checksum.native_kernels()[1:]
    assert [k for k in slower if any(f"(native, {k} kernel)" in label for label in rows)] == slower
    if shutil.which("cc") or shutil.which("gcc") or shutil.which("clang"):
        assert [label for _, label in FLOORS if label in rows] == [label for _, label in FLOORS]
    else:
        pytest.skip("no C compiler: the floors are skipped")
    left = sorted(os.listdir(shm_root))
    assert left == ["posenc-registry", "shm_publish_floors"], left  # no table, no scratch file
