"""The header-only C reader (native/include/posenc_shm.h) against tables Python published:
tests/c/shm_reader_test.c is compiled with the system C compiler and run on them."""

import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
from posenc.shm import attach
from shm_support import poke, table_from

pytest_plugins = ["shm_support"]

REPO = Path(__file__).resolve().parents[1]
ROPE = {"kind": "rope", "head_dim": 64, "base": 10000.0, "scaling": {"rope_type": "yarn", "factor": 4.0},
        "original_max_position_embeddings": 2048}


@pytest.fixture(scope="module")
def reader(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler (cc/gcc/clang) on PATH")
    exe = tmp_path_factory.mktemp("c") / "shm_reader_test"
    subprocess.run([cc, "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", f"-I{REPO / 'native' / 'include'}",
                    str(REPO / "tests" / "c" / "shm_reader_test.c"), "-o", str(exe)], check=True)
    return exe


def run(reader, *args):
    proc = subprocess.run([str(reader), *map(str, args)], capture_output=True, text=True, timeout=60, check=False)
    return proc.returncode, proc.stdout.splitlines()


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
def test_c_reader_attaches_by_name_and_reads_exact_rows(reader, shm_store, shm_root, encoding, start, stop, dtype):
    table = table_from(encoding, start, stop, dtype)
    generation = shm_store.publish("tbl", table).generation
    positions = [start, start + 1, (start + stop) // 2, stop - 1, stop, start - 1]
    code, lines = run(reader, "name", shm_root, "tbl", 1, *positions)
    assert code == 0, lines
    assert lines[0] == (f"ok generation={generation} start={start} stop={stop} width={table.width} "
                        f"dtype={1 if dtype == 'float32' else 2} hash={table.hash} name=tbl")
    rows = parse_rows(lines)
    py = attach("tbl", root=shm_root)
    for p in positions[:4]:
        np.testing.assert_array_equal(np.array(rows[p], dtype=dtype), py.array[p - start])  # bit-exact
    assert rows[stop] is None and rows[start - 1] is None


@pytest.mark.parametrize("corrupt, code, message", [
    (lambda p, n: poke(p, 0, b"XXXXXXXX"), -5, "bad magic"),
    (lambda p, n: poke(p, 8, struct.pack("<I", 9)), -6, "unknown format version 9"),
    (lambda p, n: poke(p, 12, struct.pack("<I", 1)), -7, "not READY (state BUILDING)"),
    (lambda p, n: p.open("r+b").truncate(n - 1), -4, "truncated"),
    (lambda p, n: poke(p, 48, struct.pack("<q", -3)), -8, "header checksum mismatch"),
    (lambda p, n: poke(p, n - 1, b"\x01"), -9, "data checksum mismatch"),
])
def test_c_reader_refuses_damaged_segments(reader, shm_store, shm_root, corrupt, code, message):
    shm_store.publish("tbl", table_from({"kind": "sinusoidal", "dim": 16}, 0, 512))
    path = shm_root / "posenc.tbl.1"
    corrupt(path, path.stat().st_size)
    status, lines = run(reader, "path", path, 1)
    assert status == 3 and lines[0].startswith(f"error {code} {path}: ") and message in lines[0], lines


def test_c_reader_skips_the_data_checksum_unless_asked(reader, shm_store, shm_root):
    shm_store.publish("tbl", table_from({"kind": "sinusoidal", "dim": 16}, 0, 512))
    poke(shm_root / "posenc.tbl.1", (shm_root / "posenc.tbl.1").stat().st_size - 1, b"\x01")
    status, lines = run(reader, "name", shm_root, "tbl", 0, 3)
    assert status == 3 and lines[0] == "error verify -9"  # attach passed; the explicit verify caught it


@pytest.mark.parametrize("name, code, message", [
    ("../etc/passwd", -1, "no '/' or '..'"),
    ("a" * 65, -1, "must be 1..64"),
    ("missing", -2, "no table named 'missing'"),
])
def test_c_reader_refuses_bad_or_unknown_names(reader, shm_store, shm_root, name, code, message):
    shm_store.publish("tbl", table_from({"kind": "sinusoidal", "dim": 16}, 0, 8))
    status, lines = run(reader, "name", shm_root, name, 1)
    assert status == 3 and lines[0].startswith(f"error {code} ") and message in lines[0], lines


def test_c_reader_follows_the_registry_to_the_newest_generation(reader, shm_store, shm_root):
    shm_store.publish("tbl", table_from({"kind": "sinusoidal", "dim": 16}, 0, 8))
    newest = shm_store.publish("tbl", table_from({"kind": "sinusoidal", "dim": 16}, 0, 9)).generation
    status, lines = run(reader, "name", shm_root, "tbl", 1, 8)
    assert status == 0 and lines[0].startswith(f"ok generation={newest} start=0 stop=9")
    status, lines = run(reader, "name", shm_root / "nowhere", "tbl", 1)
    assert status == 3 and lines[0].startswith("error -2 ") and "no registry" in lines[0]
