"""The shared-memory store: publish, attach, lookup, replace, remove, list, reclaim, and every
refusal a reader must make (each with a message naming the problem)."""

import fcntl
import json
import os
import shutil
import struct
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import posenc
import pytest
from posenc.errors import PosencError
from posenc.shm import ShmError, TableStore, attach, list_tables
from posenc.shm.format import HEADER_SIZE
from posenc.shm.segment import open_ready
from shm_support import assert_table_rows, oracle_rows, poke, python_worker, table_from

pytest_plugins = ["shm_support"]

SIN64 = {"kind": "sinusoidal", "dim": 64}
LLAMA_ROPE = {"kind": "rope", "head_dim": 128, "base": 500000.0,
              "scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                          "original_max_position_embeddings": 8192}}


@pytest.mark.parametrize("encoding, start, stop, dtype", [
    (SIN64, 0, 3000, "float32"),
    ({"kind": "sinusoidal", "dim": 33, "layout": "t2t"}, -700, 900, "float64"),
    (LLAMA_ROPE, 0, 4096, "float32"),
    (LLAMA_ROPE, 100_000, 101_000, "float64"),
])
def test_published_table_matches_oracle(shm_store, shm_root, encoding, start, stop, dtype):
    table = table_from(encoding, start, stop, dtype)
    info = shm_store.publish("t", table)
    assert (info.name, info.state, info.shape, info.dtype) == ("t", "READY", table.shape, dtype)
    assert info.nbytes == table.nbytes and info.writer_pid == os.getpid()
    with attach("t", root=shm_root) as tbl:
        assert (tbl.start, tbl.stop, tbl.generation, tbl.spec) == (start, stop, info.generation, table)
        assert tbl.array.shape == table.shape and tbl.array.dtype == np.dtype(dtype)
        assert not tbl.array.flags.writeable
        assert tbl.array.ctypes.data % 64 == 0
        assert_table_rows(tbl.array, table)


def test_lookup_gathers_rows_and_checks_positions(shm_store, shm_root):
    table = table_from(SIN64, -50, 2000)
    shm_store.publish("t", table)
    tbl = attach("t", root=shm_root)
    positions = np.random.default_rng(0).integers(-50, 2000, 5000)
    np.testing.assert_array_equal(tbl.lookup(positions), tbl.array[positions + 50])
    out = np.empty((3, 64), np.float32)
    assert tbl.lookup(np.array([-50, 0, 1999.0]), out=out) is out
    np.testing.assert_array_equal(out, tbl.array[[0, 50, 2049]])
    np.testing.assert_array_equal(tbl.lookup(np.array([7], np.uint64)), tbl.array[[57]])
    assert tbl.lookup([]).shape == (0, 64)
    for bad, message in [([2000], "outside table 't'"), ([-51], "element 0"), (np.array([0, 5, 2**64 - 1], np.uint64), "element 2"), ([2**70], "integers"),
                         ([1.5], "integer"), ([[1, 2]], "1-D"), (["a"], "integers"), ([True], "integers"),
                         ([float("nan")], "not finite")]:
        with pytest.raises(PosencError, match=message) as err:
            tbl.lookup(bad)
        assert err.value.field == "positions"
    for bad_out in [np.empty((2, 64), np.float32), np.empty((3, 64), np.float64), "x",
                    np.empty((3, 128), np.float32)[:, ::2], np.empty((64, 3), np.float32).T]:  # not contiguous
        with pytest.raises(PosencError) as err:
            tbl.lookup([0, 1, 2], out=bad_out)
        assert err.value.field == "out"
    tbl.close()
    with pytest.raises(ShmError, match="closed"):
        tbl.lookup([0])


def test_replacing_keeps_old_mappings_valid_and_unlinks_old_file(shm_store, shm_root):
    first, second = table_from(SIN64, 0, 1000), table_from(LLAMA_ROPE, 0, 1000)
    g1 = shm_store.publish("t", first).generation
    old = attach("t", root=shm_root)
    g2 = shm_store.publish("t", second).generation
    assert g2 > g1
    assert not (shm_root / f"posenc.t.{g1}").exists() and (shm_root / f"posenc.t.{g2}").exists()
    assert_table_rows(old.array, first)  # still mapped, still intact
    with attach("t", root=shm_root) as new:
        assert (new.generation, new.spec) == (g2, second)
        assert_table_rows(new.array, second)
    old.close()


def test_an_interrupted_build_leaves_the_previous_generation_published(shm_store, shm_root):
    shm_store.publish("t", table_from(SIN64, 0, 100))

    def interrupt(done, total):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        shm_store.publish("t", table_from(SIN64, 0, 100_000), progress=interrupt)
    assert sorted(os.listdir(shm_root)) == ["posenc-registry", "posenc.t.1"]
    assert attach("t", root=shm_root).generation == 1


def test_remove_and_close_unlink_only_what_they_should(shm_root):
    mine, other = TableStore(shm_root), TableStore(shm_root)
    mine.publish("a", table_from(SIN64, 0, 100))
    mine.publish("b", table_from(SIN64, 0, 100))
    other.publish("c", table_from(SIN64, 0, 100))
    held = attach("a", root=shm_root)
    mine.remove("a")
    with pytest.raises(ShmError, match="no table named 'a'"):
        attach("a", root=shm_root)
    with pytest.raises(ShmError, match="no table named 'a'"):
        mine.remove("a")
    assert held.lookup([5]).shape == (1, 64)  # a reader's mapping outlives the removal
    mine.close()
    mine.close()  # idempotent
    assert [i.name for i in list_tables(shm_root)] == ["c"]
    assert sorted(os.listdir(shm_root)) == ["posenc-registry", "posenc.c.3"]
    with pytest.raises(ShmError, match="closed"):
        mine.publish("d", table_from(SIN64, 0, 10))
    other.close()
    assert os.listdir(shm_root) == ["posenc-registry"]


def test_segments_and_registry_are_created_mode_0640_by_default(shm_root):
    with TableStore(shm_root) as s:
        s.publish("t", table_from(SIN64, 0, 10))
        assert os.stat(shm_root / "posenc.t.1").st_mode & 0o777 == 0o640
        assert os.stat(shm_root / "posenc-registry").st_mode & 0o777 == 0o640
    private = shm_root / "private"
    with TableStore(private, mode=0o600) as s:
        s.publish("t", table_from(SIN64, 0, 10))
        assert os.stat(private / "posenc.t.1").st_mode & 0o777 == 0o600
        assert os.stat(private / "posenc-registry").st_mode & 0o777 == 0o600
    for bad in [0o1777, -1, "0640", True]:
        with pytest.raises(PosencError) as err:
            TableStore(shm_root, mode=bad)
        assert err.value.field == "mode"


# ---- refusals --------------------------------------------------------------------------------

def _published(shm_store, shm_root):
    shm_store.publish("t", table_from(SIN64, 0, 1000))
    path = shm_root / "posenc.t.1"
    return path, os.path.getsize(path)


@pytest.mark.parametrize("corrupt, message", [
    (lambda p, n: poke(p, 0, b"NOTPOSEN"), "bad magic"),
    (lambda p, n: poke(p, 8, struct.pack("<I", 2)), "unknown format version 2"),
    (lambda p, n: poke(p, 12, struct.pack("<I", 1)), r"not READY \(state BUILDING\)"),
    (lambda p, n: poke(p, 12, struct.pack("<I", 0)), r"not READY \(state EMPTY\)"),
    (lambda p, n: os.truncate(p, n - 4096), "truncated"),
    (lambda p, n: os.truncate(p, 100), "truncated: 100 bytes"),
    (lambda p, n: poke(p, 48, struct.pack("<q", 5)), "header checksum mismatch"),
    (lambda p, n: poke(p, 40, struct.pack("<Q", 65)), "inconsistent header"),
    (lambda p, n: poke(p, n - 3, b"\x7f"), "data checksum mismatch"),
])
def test_reader_refuses_damaged_segments(shm_store, shm_root, corrupt, message):
    path, size = _published(shm_store, shm_root)
    corrupt(path, size)
    with pytest.raises(ShmError, match=message) as err:
        attach("t", root=shm_root)
    assert err.value.field == "segment" and str(path) in str(err.value)


def test_checksum_verification_can_be_skipped_but_verify_always_checks(shm_store, shm_root):
    path, size = _published(shm_store, shm_root)
    poke(path, size - 3, b"\x7f")
    assert attach("t", root=shm_root, verify=False).array.shape == (1000, 64)
    with pytest.raises(ShmError, match="data checksum mismatch"):
        open_ready(path, verify=True)


@pytest.mark.parametrize("name", ["a/b", "../etc", "..", "x..y", "", "a" * 65, "sp ace", "ü", 7])
def test_bad_names_are_refused_before_touching_files(shm_store, shm_root, name):
    with pytest.raises(ShmError) as err:
        attach(name, root=shm_root)
    assert err.value.field == "name"
    with pytest.raises(ShmError):
        shm_store.publish(name, table_from(SIN64, 0, 10))
    assert os.listdir(shm_root) == ["posenc-registry"]


def test_missing_tables_and_registries_are_clear_errors(shm_store, shm_root, tmp_path):
    with pytest.raises(ShmError, match="no table named 'nope'"):
        attach("nope", root=shm_root)
    with pytest.raises(ShmError, match="no registry"):
        attach("nope", root=tmp_path)
    assert list_tables(tmp_path / "missing") == []
    shm_store.publish("t", table_from(SIN64, 0, 10))
    os.unlink(shm_root / "posenc.t.1")
    with pytest.raises(ShmError, match="the file is gone"):
        attach("t", root=shm_root)


# ---- readers leave no trace ------------------------------------------------------------------

def test_a_reader_process_that_exits_unlinks_nothing(shm_store, shm_root):
    table = table_from(SIN64, 0, 500)
    shm_store.publish("t", table)
    before = sorted(os.listdir(shm_root))
    worker = python_worker(f"attach_and_exit({str(shm_root)!r}, 't')")
    out, _ = worker.communicate(timeout=120)
    assert worker.returncode == 0
    report = json.loads(out)
    assert report["row0"] == pytest.approx(oracle_rows(table, [0])[0, :2].tolist(), abs=1e-7)
    assert not report["resource_tracker"]  # nothing registered the segment for cleanup at exit
    assert sorted(os.listdir(shm_root)) == before
    assert attach("t", root=shm_root).generation == 1


# ---- listing, lookup by spec, reclaim --------------------------------------------------------

def test_list_reports_ready_stale_and_invalid_segments(shm_store, shm_root):
    table = table_from(LLAMA_ROPE, 0, 256)
    shm_store.publish("t", table)
    shutil.copy(shm_root / "posenc.t.1", shm_root / "posenc.t.7")  # a READY orphan the registry does not name
    (shm_root / "posenc.junk.9").write_bytes(b"not a segment")
    (shm_root / "unrelated.file").write_bytes(b"ignored")
    infos = {i.segment: i for i in list_tables(shm_root)}
    assert sorted(infos) == ["posenc.junk.9", "posenc.t.1", "posenc.t.7"]
    ready = infos["posenc.t.1"]
    assert (ready.state, ready.kind, ready.spec, ready.shape, ready.generation) == \
        ("READY", "rope", table.to_dict(), (256, 128), 1)
    assert infos["posenc.t.7"].state == "STALE" and infos["posenc.junk.9"].state == "INVALID"
    assert shm_store.list() == list_tables(shm_root)


def test_attach_by_spec_finds_the_table_holding_it(shm_store, shm_root):
    wanted = table_from(LLAMA_ROPE, 0, 300)
    shm_store.publish("other", table_from(SIN64, 0, 300))
    shm_store.publish("llama", wanted)
    assert attach(wanted, root=shm_root).name == "llama"
    with pytest.raises(ShmError, match="no READY table"):
        attach(table_from(SIN64, 0, 301), root=shm_root)


def test_reclaim_removes_unlocked_orphans_and_spares_live_builds(shm_store, shm_root):
    shm_store.publish("t", table_from(SIN64, 0, 100))
    shutil.copy(shm_root / "posenc.t.1", shm_root / "posenc.t.5")
    (shm_root / "posenc.half.6").write_bytes(b"")  # a writer died right after creating it
    (shm_root / "posenc.busy.8").write_bytes(b"")
    fd = os.open(shm_root / "posenc.busy.8", os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a live writer holds its build lock
    try:
        assert shm_store.reclaim() == 2
        assert sorted(os.listdir(shm_root)) == ["posenc-registry", "posenc.busy.8", "posenc.t.1"]
    finally:
        os.close(fd)
    assert TableStore(shm_root).reclaim() == 0  # the new shm_store already reclaimed it on start
    assert sorted(os.listdir(shm_root)) == ["posenc-registry", "posenc.t.1"]


def test_generations_are_unique_across_stores_and_registry_rebuilds(shm_root):
    a, b = TableStore(shm_root), TableStore(shm_root)
    generations = [a.publish("x", table_from(SIN64, 0, 10)).generation,
                   b.publish("y", table_from(SIN64, 0, 10)).generation,
                   a.publish("y", table_from(SIN64, 0, 11)).generation]
    assert generations == [1, 2, 3]
    a._registry.close(), b._registry.close()  # simulate a lost registry file
    os.unlink(shm_root / "posenc-registry")
    assert TableStore(shm_root).publish("z", table_from(SIN64, 0, 10)).generation == 4


def test_one_store_can_publish_from_many_threads(shm_store, shm_root):
    tables = {f"t{k}": table_from({"kind": "sinusoidal", "dim": 8 + k}, 0, 2000) for k in range(6)}
    with ThreadPoolExecutor(3) as pool:
        infos = list(pool.map(lambda name: shm_store.publish(name, tables[name]), [*tables, *tables]))
    assert len({i.generation for i in infos}) == 12
    assert sorted(os.listdir(shm_root)) == sorted(["posenc-registry"] + [
        f"posenc.{i.name}.{attach(i.name, root=shm_root).generation}" for i in infos[:6]])
    for name, table in tables.items():
        with attach(name, root=shm_root) as tbl:
            assert_table_rows(tbl.array, table)


def test_header_is_exactly_the_documented_layout(shm_store, shm_root):
    table = table_from(SIN64, 3, 13, "float64")
    shm_store.publish("t", table)
    raw = (shm_root / "posenc.t.1").read_bytes()
    assert raw[:8] == b"POSENCTB" and struct.unpack_from("<III", raw, 8)[:2] == (1, 2)
    dtype, itemsize, rows, width, start, offset, nbytes, generation = struct.unpack_from("<IIQQqQQQ", raw, 24)
    assert (dtype, itemsize, rows, width, start, nbytes, generation) == (2, 8, 10, 64, 3, 10 * 64 * 8, 1)
    pid, spec_len = struct.unpack_from("<II", raw, 88)
    assert pid == os.getpid() and raw[HEADER_SIZE:HEADER_SIZE + spec_len].decode() == table.canonical_json
    assert raw[96:112].decode() == table.hash and raw[112:176].rstrip(b"\0") == b"t"
    assert offset % 64 == 0 and offset >= HEADER_SIZE + spec_len and len(raw) == offset + nbytes
    np.testing.assert_array_equal(np.frombuffer(raw, np.float64, offset=offset).reshape(10, 64),
                                  attach("t", root=shm_root).array)


def test_alibi_tables_publish_and_read_back(tmp_path):
    """An ALiBi table row p is slopes * p (BLOOM's form); causal biases are row differences."""
    from posenc.shm import TableStore, attach
    from posenc.encodings import AlibiSpec
    from posenc.tables import TableSpec

    store = TableStore(tmp_path)
    try:
        store.publish("alibi12", TableSpec(AlibiSpec(12, variant="bloom"), 0, 4096, dtype="float64"))
        table = attach("alibi12", root=tmp_path)
        slopes = posenc.alibi_slopes(12, variant="bloom")
        np.testing.assert_array_equal(table.lookup([0, 7, 4095]), np.array([0, 7, 4095])[:, None] * slopes)
        i, j = 300, 120
        causal = posenc.alibi_bias(12, 1, 1, q_offset=i, k_offset=j, variant="bloom", dtype="float64")[:, 0, 0]
        np.testing.assert_allclose(table.lookup([j])[0] - table.lookup([i])[0], causal, rtol=1e-12)
        table.close()
    finally:
        store.close()
