"""Prepared segments (`TableStore.prepare`, `keep_prepared`): a publish into one writes the
same file a cold publish writes, byte for byte (bar the generation, the creation time and
the header CRC covering them), readable by posenc, the C-free doc reader and the checks of
docs/shm-format.md; it is used only by a table of its size; a failure leaves the previous
generation and nothing else; the memory it holds is released on close; two stores share a
directory safely. Pieces are made small here so a small table still spans several of
them (the CRC chained across pieces, progress between them)."""

from __future__ import annotations

import fcntl
import os
import threading
import time
import zlib
from pathlib import Path

import numpy as np
import pytest
from posenc.kernels import threads
from posenc.shm import ShmError, TableStore, attach, checksum, prepared
from posenc.shm.format import HEADER_SIZE, segment_size
from shm_support import assert_table_rows, header_of, table_from
from test_shm_doc_reader import DocReader

pytest_plugins = ["shm_support"]

SIN = {"kind": "sinusoidal", "dim": 64}
TABLES = [
    (SIN, 0, 3000, "float32", "crc32c"),
    ({"kind": "sinusoidal", "dim": 24, "layout": "t2t"}, -40, 1300, "float64", "crc32"),
    ({"kind": "rope", "head_dim": 32, "scaling": {"rope_type": "linear", "factor": 2.0}}, 0, 1025, "float32",
     "crc32c"),
    ({"kind": "alibi", "n_heads": 12}, 0, 2000, "float32", "crc32"),
]
#: The header bytes a second generation may differ in: header_crc (16..19), generation and
#: created_ns (72..87). Everything else, the spec, padding and rows included, is identical.
VARYING = set(range(16, 20)) | set(range(72, 88))


@pytest.fixture(autouse=True)
def small_pieces(monkeypatch):
    monkeypatch.setattr(prepared, "PIECE_BYTES_PER_THREAD", 4096 // threads())


def segment_bytes(root: Path, name: str, generation: int) -> bytes:
    return (root / f"posenc.{name}.{generation}").read_bytes()


def open_files_under(root: Path) -> list[str]:
    """What this process holds in `root`: fds (an unnamed file shows as '#N (deleted)') and mappings."""
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(root) + "/"):
            held.append(target)
    with open("/proc/self/maps") as maps:
        held += [line.split(None, 5)[-1].strip() for line in maps if str(root) + "/" in line]
    return held


def unnamed_files_under(root: Path) -> list[str]:
    return [target for target in open_files_under(root) if "(deleted)" in target]


@pytest.mark.parametrize("encoding, start, stop, dtype, algorithm", TABLES)
def test_a_prepared_publish_writes_the_cold_publish_s_bytes(shm_root, encoding, start, stop, dtype, algorithm):
    table = table_from(encoding, start, stop, dtype)
    with TableStore(shm_root, checksum=algorithm) as store:
        cold = store.publish("t", table).generation
        cold_bytes = segment_bytes(shm_root, "t", cold)
        store.prepare(table)
        assert store.prepared_bytes == len(cold_bytes) == segment_size(table)
        warm = store.publish("t", table).generation
        assert store.prepared_bytes == 0  # used up
        warm_bytes = segment_bytes(shm_root, "t", warm)
        assert len(warm_bytes) == len(cold_bytes)
        assert warm_bytes[HEADER_SIZE:] == cold_bytes[HEADER_SIZE:]  # spec, padding, every row
        assert {i for i in range(HEADER_SIZE) if warm_bytes[i] != cold_bytes[i]} <= VARYING
        header = header_of(shm_root / f"posenc.t.{warm}")
        assert header["state"] == 2 and header["generation"] == warm
        data = np.frombuffer(warm_bytes, np.uint8, offset=header["data_offset"])
        expected = checksum.crc32c(data) if algorithm == "crc32c" else zlib.crc32(data)
        assert header["data_crc"] == expected
        with attach("t", root=shm_root) as tbl:  # verifies the data checksum
            assert tbl.generation == warm
            if table.kind != "alibi":
                assert_table_rows(tbl.array, table)
            fields, rows = DocReader(shm_root).attach("t")
            np.testing.assert_array_equal(rows, tbl.array)
            assert fields["generation"] == warm and fields["spec"] == table.canonical_json


def test_the_prepared_segment_serves_only_a_table_of_its_size(shm_root):
    small, big = table_from(SIN, 0, 100), table_from(SIN, 0, 2000)
    with TableStore(shm_root) as store:
        store.prepare(big)
        store.publish("small", small)  # another size: a cold publish, the prepared one stays
        assert store.prepared_bytes == segment_size(big)
        store.prepare(big)  # one of this size is held already: nothing changes
        assert store.prepared_bytes == segment_size(big) and len(set(unnamed_files_under(shm_root))) == 1
        same_size = table_from(SIN, 5, 2005)  # another table whose file has the same size
        assert segment_size(same_size) == segment_size(big)
        store.publish("shifted", same_size)
        assert store.prepared_bytes == 0
        with attach("shifted", root=shm_root) as tbl:
            assert tbl.start == 5
            assert_table_rows(tbl.array, same_size)
        store.prepare(small)
        store.prepare(big)  # replaces the small one: at most one per store
        assert store.prepared_bytes == segment_size(big)
        store.publish("big", big)
    assert open_files_under(shm_root) == []


def test_the_file_appears_only_once_it_is_ready_and_stays_build_locked(shm_root):
    table = table_from(SIN, 0, 3000)
    seen = []
    with TableStore(shm_root) as store:
        store.prepare(table)
        info = store.publish("t", table, progress=lambda done, total: seen.append(sorted(os.listdir(shm_root))))
        assert len(seen) > 1 and all(listing == ["posenc-registry"] for listing in seen)
        path = shm_root / f"posenc.t.{info.generation}"
        fd = os.open(path, os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):  # the build lock, as on a cold segment
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
        assert TableStore(shm_root).reclaim() == 0 and path.exists()


@pytest.mark.parametrize("failure", [KeyboardInterrupt, ValueError])
def test_a_failure_midway_leaves_the_previous_generation_and_nothing_else(shm_root, failure):
    table = table_from(SIN, 0, 3000)
    with TableStore(shm_root) as store:
        first = store.publish("t", table).generation
        store.prepare(table)
        calls = []

        def fail_on_second_piece(done, total):
            calls.append(done)
            if len(calls) == 2:
                raise failure("stop")

        with pytest.raises(failure):
            store.publish("t", table, progress=fail_on_second_piece)
        assert calls[-1] < table.rows
        assert sorted(os.listdir(shm_root)) == ["posenc-registry", f"posenc.t.{first}"]
        assert store.prepared_bytes == 0
        with attach("t", root=shm_root) as tbl:
            assert tbl.generation == first
        assert store.publish("t", table).generation > first  # and the store carries on
    assert open_files_under(shm_root) == []


def test_a_taken_name_fails_the_link_cleanly(shm_root, monkeypatch):
    table = table_from(SIN, 0, 500)
    with TableStore(shm_root) as store:
        store.prepare(table)
        squatter = shm_root / "posenc.t.1"

        def plant(done, total):  # after generation 1 was allocated (a file there already would be skipped)
            if not squatter.exists():
                squatter.write_bytes(b"not ours")  # planted where this generation's link goes

        real_reclaim = TableStore.reclaim
        monkeypatch.setattr(TableStore, "reclaim", lambda self: 0)  # keep the planted file
        with pytest.raises(ShmError, match="cannot link a prepared segment"):
            store.publish("t", table, progress=plant)
        monkeypatch.setattr(TableStore, "reclaim", real_reclaim)
        assert squatter.read_bytes() == b"not ours"
        assert sorted(os.listdir(shm_root)) == ["posenc-registry", "posenc.t.1"] and store.prepared_bytes == 0
        with pytest.raises(ShmError, match="no table named 't'"):
            attach("t", root=shm_root)
    assert unnamed_files_under(shm_root) == []


def test_close_releases_the_prepared_segment(shm_root):
    store = TableStore(shm_root)
    store.prepare(table_from(SIN, 0, 2000))
    held = unnamed_files_under(shm_root)
    assert len(held) >= 2 and len(set(held)) == 1 and "#" in held[0]  # its fd and its mapping, no name
    assert os.listdir(shm_root) == ["posenc-registry"]
    store.close()
    assert store.prepared_bytes == 0 and open_files_under(shm_root) == []
    with pytest.raises(ShmError, match="closed"):
        store.prepare(table_from(SIN, 0, 10))


def test_keep_prepared_prepares_the_next_segment_in_the_background(shm_root):
    table = table_from(SIN, 0, 2000)
    store = TableStore(shm_root, keep_prepared=True)
    assert store.prepared_bytes == 0  # nothing before the first publish: the size is not known
    store.publish("t", table)
    deadline = time.monotonic() + 30
    while store.prepared_bytes == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert store.prepared_bytes == segment_size(table)
    assert [t.name for t in threading.enumerate() if t.name.startswith("posenc-store")]
    second = store.publish("t", table)  # into the prepared one; then the next is prepared
    with attach("t", root=shm_root) as tbl:
        assert tbl.generation == second.generation
        assert_table_rows(tbl.array, table)
    store.publish("u", table_from(SIN, 0, 10))
    store.close()  # joins the background thread, frees whatever it prepared
    assert not [t for t in threading.enumerate() if t.name.startswith("posenc-store") and t.is_alive()]
    assert open_files_under(shm_root) == [] and os.listdir(shm_root) == ["posenc-registry"]


def test_by_default_a_store_holds_no_prepared_segment(shm_root):
    with TableStore(shm_root) as store:
        store.publish("t", table_from(SIN, 0, 2000))
        store.publish("t", table_from(SIN, 0, 2000))
        assert store.prepared_bytes == 0 and unnamed_files_under(shm_root) == []
        assert not [t for t in threading.enumerate() if t.name.startswith("posenc-store")]
    with pytest.raises(ValueError, match="keep_prepared"):
        TableStore(shm_root, keep_prepared="yes")


def test_two_stores_with_prepared_segments_share_a_directory(shm_root):
    table = table_from(SIN, 0, 1500)
    a, b = TableStore(shm_root, keep_prepared=True), TableStore(shm_root)
    generations = []
    for round_ in range(4):
        b.prepare(table)
        generations.append(a.publish("shared", table).generation)
        generations.append(b.publish("shared", table).generation)
        a.publish(f"a{round_}", table)
        assert b.reclaim() == 0 and a.reclaim() == 0  # neither removes the other's segments
    assert len(set(generations)) == len(generations)
    with attach("shared", root=shm_root) as tbl:
        assert tbl.generation == generations[-1]  # the last flip won
        assert_table_rows(tbl.array, table)
    published = a.list()
    assert sorted(i.name for i in published) == ["a0", "a1", "a2", "a3", "shared"]
    assert {i.state for i in published} == {"READY"}  # nothing half-built, nothing stale left
    assert set(os.listdir(shm_root)) == {"posenc-registry"} | {f"posenc.{i.name}.{i.generation}" for i in published}
    a.close()
    b.close()
    assert os.listdir(shm_root) == ["posenc-registry"] and open_files_under(shm_root) == []


def test_prepare_refuses_what_it_cannot_prepare(shm_root):
    with TableStore(shm_root) as store, pytest.raises(ValueError, match="TableSpec"):
        store.prepare("sin128")
    gone = shm_root / "gone"
    store = TableStore(gone)
    os.unlink(gone / "posenc-registry")
    os.rmdir(gone)
    with pytest.raises(ShmError, match="cannot prepare a segment in .*gone: No such file"):
        store.prepare(table_from(SIN, 0, 10))
    assert store.prepared_bytes == 0
    store.close()
