"""The header-only C reader (native/include/posenc_shm.h) against tables Python published:
tests/c/shm_reader_test.c is compiled with the system C compiler and run on them."""

import numpy as np
import pytest
from posenc.shm import attach
from shm_support import poke, run_c_reader, table_from

pytest_plugins = ["shm_support"]

ROPE = {"kind": "rope", "head_dim": 64, "base": 10000.0, "scaling": {"rope_type": "yarn", "factor": 4.0},
        "original_max_position_embeddings": 2048}


def parse_rows(lines):
    rows = {}
    for line in lines[1:]:
        _, position, *values = line.split()
        rows[int(position)] = None if values == ["none"] else [float.fromhex(v) for v in values]
    return rows


@pytest.mark.parametrize("encoding, start, stop, dtype", [
    ({"kind": "sinusoidal", "dim": 48}, 0, 4096, "float32"),
    (ROPE, -1000, 9000, "float64"),
])
def test_c_reader_attaches_by_name_and_reads_exact_rows(shm_c_reader, shm_store, shm_root, encoding, start, stop, dtype):
    table = table_from(encoding, start, stop, dtype)
    generation = shm_store.publish("tbl", table).generation
    positions = [start, start + 1, (start + stop) // 2, stop - 1, stop, start - 1]
    code, lines = run_c_reader(shm_c_reader, "name", shm_root, "tbl", 1, *positions)
    assert code == 0, lines
    assert lines[0] == (f"ok generation={generation} start={start} stop={stop} width={table.width} "
                        f"dtype={1 if dtype == 'float32' else 2} hash={table.hash} name=tbl checksum=1")
    rows = parse_rows(lines)
    py = attach("tbl", root=shm_root)
    for p in positions[:4]:
        np.testing.assert_array_equal(np.array(rows[p], dtype=dtype), py.array[p - start])  # bit-exact
    assert rows[stop] is None and rows[start - 1] is None


def test_c_reader_skips_the_data_checksum_unless_asked(shm_c_reader, shm_store, shm_root):
    shm_store.publish("tbl", table_from({"kind": "sinusoidal", "dim": 16}, 0, 512))
    poke(shm_root / "posenc.tbl.1", (shm_root / "posenc.tbl.1").stat().st_size - 1, b"\x01")
    status, lines = run_c_reader(shm_c_reader, "name", shm_root, "tbl", 0, 3)
    assert status == 3 and lines[0] == "error verify -9"  # attach passed; the explicit verify caught it


@pytest.mark.parametrize("name, code, message", [
    ("../etc/passwd", -1, "no '/' or '..'"),
    ("a" * 65, -1, "must be 1..64"),
    ("missing", -2, "no table named 'missing'"),
])
def test_c_reader_refuses_bad_or_unknown_names(shm_c_reader, shm_store, shm_root, name, code, message):
    shm_store.publish("tbl", table_from({"kind": "sinusoidal", "dim": 16}, 0, 8))
    status, lines = run_c_reader(shm_c_reader, "name", shm_root, name, 1)
    assert status == 3 and lines[0].startswith(f"error {code} ") and message in lines[0], lines


def test_c_reader_follows_the_registry_to_the_newest_generation(shm_c_reader, shm_store, shm_root):
    shm_store.publish("tbl", table_from({"kind": "sinusoidal", "dim": 16}, 0, 8))
    newest = shm_store.publish("tbl", table_from({"kind": "sinusoidal", "dim": 16}, 0, 9)).generation
    status, lines = run_c_reader(shm_c_reader, "name", shm_root, "tbl", 1, 8)
    assert status == 0 and lines[0].startswith(f"ok generation={newest} start=0 stop=9")
    status, lines = run_c_reader(shm_c_reader, "name", shm_root / "nowhere", "tbl", 1)
    assert status == 3 and lines[0].startswith("error -2 ") and "no registry" in lines[0]
