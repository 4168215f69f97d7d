"""Safety of the shared-memory store under concurrency, crashes and a full tmpfs.

* torture: a writer process republishes one table with alternating specs while two reader
  processes attach and check every row they read against the oracle, for ~3 s;
* kill -9 of a writer mid-build: readers never attach the partial table; the next store
  start reclaims it and the next build succeeds;
* a tmpfs too small for the table: a clean error, nothing published, nothing left behind.
"""

import json
import os
import signal
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest
from posenc.shm import ShmError, TableStore, attach, list_tables
from posenc.shm.segment import open_ready
from shm_support import assert_table_rows, python_worker, table_from

pytest_plugins = ["shm_support"]

SIN = {"kind": "sinusoidal", "dim": 64}
ROPE = {"kind": "rope", "head_dim": 64, "base": 500000.0}
READ_SECONDS = 3.0


def test_torture_readers_only_ever_see_whole_generations(shm_root):
    specs = json.dumps([table_from(SIN, 0, 2048).to_dict(), table_from(ROPE, 0, 2048).to_dict()])
    # Both specs are published before any reader starts, so readers never find the table missing.
    stop_file = shm_root / "stop-writer"
    with TableStore(shm_root) as seed:
        seed.publish("hot", table_from(SIN, 0, 2048))
        writer = python_worker(f"republish_loop({str(shm_root)!r}, 'hot', {specs!r}, {str(stop_file)!r})")
        readers = [python_worker(f"read_loop({str(shm_root)!r}, 'hot', {specs!r}, {READ_SECONDS})") for _ in range(2)]
        try:
            results = [json.loads(r.communicate(timeout=120)[0]) for r in readers]
        finally:
            stop_file.touch()
            writer_out, _ = writer.communicate(timeout=120)
        assert [r.returncode for r in readers] == [0, 0], "a reader saw a bad row (see its traceback above)"
        assert writer.returncode == 0
    stop_file.unlink()
    for result in results:
        assert result["generations"] >= 10, result  # the table really changed under the reader
        assert result["rows_checked"] > 10 * 2048
    assert json.loads(writer_out)["published"] >= 20
    assert os.listdir(shm_root) == ["posenc-registry"]  # every replaced generation was unlinked


def test_writer_killed_mid_build_is_never_attached_and_is_reclaimed(shm_root):
    good, big = table_from(SIN, 0, 1000), table_from(ROPE, 0, 1 << 17)  # big: 32 MiB, 8 blocks
    store = TableStore(shm_root)
    g1 = store.publish("t", good).generation
    child = python_worker(f"stalled_build({str(shm_root)!r}, 't', {json.dumps(big.to_dict())!r})")
    try:
        assert json.loads(child.stdout.readline())["building"] > 0
        (partial,) = [i for i in list_tables(shm_root) if i.state == "BUILDING"]
        assert (partial.name, partial.writer_pid) == ("t", child.pid)
        with attach("t", root=shm_root) as tbl:  # readers keep getting the published generation
            assert tbl.generation == g1
            assert_table_rows(tbl.array, good)
        with pytest.raises(ShmError, match=r"not READY \(state BUILDING\)"):
            open_ready(shm_root / partial.segment, verify=True)
        assert store.reclaim() == 0  # its writer is alive: not ours to reclaim
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
        child.stdout.close()
    assert (shm_root / partial.segment).exists()
    assert attach("t", root=shm_root).generation == g1
    assert TableStore(shm_root).reclaim() == 0  # the new store's start already reclaimed it
    assert not (shm_root / partial.segment).exists()
    info = store.publish("t", big)
    with attach("t", root=shm_root) as tbl:
        assert tbl.generation == info.generation > partial.generation
        rows = np.arange(0, 1 << 17, 997)
        assert_table_rows(tbl.lookup(rows), big, rows)
    store.close()
    assert os.listdir(shm_root) == ["posenc-registry"]


@pytest.fixture
def small_tmpfs():
    """A 1 MiB tmpfs (needs mount rights: root or CAP_SYS_ADMIN), unmounted afterwards."""
    mountpoint = Path(tempfile.mkdtemp(prefix="posenc-tmpfs-"))
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mountpoint)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        mountpoint.rmdir()
        reason = f"cannot mount a small tmpfs here: {proc.stderr.strip() or proc.returncode}"
        print(reason)
        pytest.skip(reason)
    yield mountpoint
    subprocess.run(["umount", "-l", str(mountpoint)], check=False)
    mountpoint.rmdir()


def test_tmpfs_too_small_fails_cleanly_and_publishes_nothing(small_tmpfs):
    store = TableStore(small_tmpfs)
    small = table_from(SIN, 0, 1024)  # 256 KiB
    g1 = store.publish("t", small).generation
    for name in ("t", "new"):
        with pytest.raises(ShmError, match=r"not enough space .* needs 2097[0-9]* bytes.* nothing was published"):
            store.publish(name, table_from(SIN, 0, 8192))  # 2 MiB
    assert sorted(os.listdir(small_tmpfs)) == ["posenc-registry", f"posenc.t.{g1}"]
    assert [(i.name, i.generation, i.state) for i in list_tables(small_tmpfs)] == [("t", g1, "READY")]
    with pytest.raises(ShmError, match="no table named 'new'"):
        attach("new", root=small_tmpfs)
    with attach("t", root=small_tmpfs) as tbl:
        assert_table_rows(tbl.array, small)
    assert store.publish("t", table_from(SIN, 0, 2048)).generation > g1  # the space was given back
    store.close()


def test_a_prepared_segment_that_does_not_fit_fails_cleanly_and_holds_nothing(small_tmpfs):
    store = TableStore(small_tmpfs, keep_prepared=True)
    table = table_from(SIN, 0, 2400)  # 600 KiB: one copy fits the 1 MiB tmpfs, two do not
    with pytest.raises(ShmError, match=r"not enough space .* for a prepared segment: it needs 2097[0-9]* bytes"):
        store.prepare(table_from(SIN, 0, 8192))  # 2 MiB
    generation = store.publish("t", table).generation  # its background preparation cannot fit: quietly none
    with pytest.raises(ShmError, match="not enough space .* for a prepared segment"):
        store.prepare(table)
    assert store.prepared_bytes == 0
    assert sorted(os.listdir(small_tmpfs)) == ["posenc-registry", f"posenc.t.{generation}"]
    with attach("t", root=small_tmpfs) as tbl:
        assert_table_rows(tbl.array, table)
    store.close()
    assert os.listdir(small_tmpfs) == ["posenc-registry"]
