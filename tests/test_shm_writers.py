"""Writers against each other and against hostile neighbours: two stores publishing one
name, planted generation numbers, a registry lock held by a reader, and the registry's mode
following the tables' (each a regression test of issue 12's shared-memory findings)."""

import json
import os
import struct
import subprocess
import sys
import time

import pytest
from posenc.shm import ShmError, TableStore, attach, list_tables
from posenc.shm.locks import holder_pids
from posenc.shm.paths import MAX_GENERATION
from shm_support import python_worker, table_from

pytest_plugins = ["shm_support"]

SIN = {"kind": "sinusoidal", "dim": 8}


def test_two_processes_publishing_one_name_both_succeed_and_the_last_flip_wins(shm_root):
    """Before: ~1 publish in 1000 raised a bare FileNotFoundError (reading our own file after
    the flip, or reclaim unlinking what the other store had just unlinked)."""
    count = 1500
    workers = [python_worker(f"publish_same_name({str(shm_root)!r}, 'hot', {count}, {8 + k})",
                             stderr=subprocess.PIPE) for k in range(2)]
    outcomes = [w.communicate(timeout=300) for w in workers]
    assert [w.returncode for w in workers] == [0, 0], [err[-2000:] for _, err in outcomes]
    flipped = [json.loads(out)["generations"] for out, _ in outcomes]
    assert all(len(g) == count and g == sorted(g) for g in flipped)
    assert not set(flipped[0]) & set(flipped[1])  # generations are never handed out twice
    with attach("hot", root=shm_root) as tbl:
        assert tbl.generation in (flipped[0][-1], flipped[1][-1])  # the last flip of one of them
    # every flip unlinked the generation it replaced: only the current one is left
    assert sorted(os.listdir(shm_root)) == ["posenc-registry", f"posenc.hot.{tbl.generation}"]


def test_two_stores_in_one_process_race_on_one_name(shm_root):
    from concurrent.futures import ThreadPoolExecutor

    stores = [TableStore(shm_root), TableStore(shm_root)]
    table = table_from(SIN, 0, 16)
    with ThreadPoolExecutor(2) as pool:
        infos = list(pool.map(lambda k: [stores[k % 2].publish("x", table) for _ in range(300)], range(2)))
    assert all(info.state == "READY" and info.name == "x" for batch in infos for info in batch)
    assert attach("x", root=shm_root).generation in (infos[0][-1].generation, infos[1][-1].generation)
    for store in stores:
        store.close()


@pytest.mark.parametrize("planted", [2**64 - 1, 2**64 - 2, 10**20 - 1])
def test_a_planted_huge_generation_is_not_a_segment(shm_root, planted):
    """Before: 2**64-1 made every build fail (struct.error), 2**64-2 every publish (OverflowError)."""
    (shm_root / f"posenc.x.{planted}").write_bytes(b"planted")
    store = TableStore(shm_root)
    assert store.publish("x", table_from(SIN, 0, 4)).generation == 1
    assert store.publish("y", table_from(SIN, 0, 4)).generation == 2
    assert (shm_root / f"posenc.x.{planted}").exists()  # foreign: listed nowhere, never unlinked
    assert [(i.name, i.generation) for i in list_tables(shm_root)] == [("x", 1), ("y", 2)]
    store.close()


def test_the_largest_generation_planted_is_reclaimed_and_publishing_recovers(shm_root):
    (shm_root / f"posenc.x.{MAX_GENERATION}").write_bytes(b"")  # parses as a (garbled) segment
    with TableStore(shm_root) as store:  # the registry starts at 0 ("recompute"); reclaim drops the file
        assert store.publish("x", table_from(SIN, 0, 4)).generation == 1


def test_an_exhausted_or_corrupted_counter_recovers_once_the_cause_is_gone(shm_root):
    import fcntl

    store = TableStore(shm_root)
    registry = shm_root / "posenc-registry"

    def set_counter(value):
        fd = os.open(registry, os.O_RDWR)
        os.pwrite(fd, struct.pack("<Q", value), 24)
        os.close(fd)

    set_counter(2**64 - 1)  # what the old code left behind: every publish failed forever
    assert store.publish("a", table_from(SIN, 0, 4)).generation == 1
    planted = shm_root / f"posenc.z.{MAX_GENERATION}"
    planted.write_bytes(b"")
    fd = os.open(planted, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # "a live writer builds it": reclaim must leave it
    try:
        set_counter(0)
        with pytest.raises(ShmError, match=f"generation numbers are exhausted .*posenc.z.{MAX_GENERATION}") as err:
            store.publish("b", table_from(SIN, 0, 4))
        assert err.value.field == "registry"
    finally:
        os.close(fd)
    assert store.publish("b", table_from(SIN, 0, 4)).generation == 2  # reclaimed, counter recomputed
    store.close()


def test_a_reader_holding_the_registry_lock_cannot_block_writers_forever(shm_root):
    TableStore(shm_root).publish("t", table_from(SIN, 0, 4))
    holder = python_worker(f"hold_registry_lock({str(shm_root)!r}, 60)")
    try:
        assert json.loads(holder.stdout.readline())["locked"] == holder.pid
        fd = os.open(shm_root / "posenc-registry", os.O_RDONLY)
        assert holder_pids(fd) == [holder.pid]
        os.close(fd)
        started = time.monotonic()
        with pytest.raises(ShmError, match=f"still locked after 0.5 s by pid {holder.pid} \\(python") as err:
            TableStore(shm_root, lock_timeout_s=0.5)
        assert err.value.field == "registry" and time.monotonic() - started < 5
        # the CLI exits with that error instead of waiting forever
        env = dict(os.environ, POSENC_SHM_DIR=str(shm_root))
        proc = subprocess.run([sys.executable, "-m", "posenc.cli", "table", "build", '{"kind":"sinusoidal","dim":8}',
                               "--positions", "0:4", "--lock-timeout", "0.5"], capture_output=True, text=True,
                              env=env, timeout=120)
        assert proc.returncode == 2 and f"registry: {shm_root}/posenc-registry: still locked after 0.5 s by pid " \
            f"{holder.pid}" in proc.stderr, proc.stderr
    finally:
        holder.kill()
        holder.wait(timeout=30)
        holder.stdout.close()
    with TableStore(shm_root, lock_timeout_s=0.5) as store:  # the holder is gone: writers go on
        assert store.publish("u", table_from(SIN, 0, 4)).state == "READY"


def test_holders_are_parsed_from_proc_locks_format(shm_root):
    path = shm_root / "f"
    path.write_bytes(b"")
    fd = os.open(path, os.O_RDONLY)
    st = os.fstat(fd)
    device = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    text = (f"1: FLOCK  ADVISORY  WRITE 4242 {device} 0 EOF\n"
            f"1: -> FLOCK  ADVISORY  WRITE 77 {device} 0 EOF\n"  # a waiter, not a holder
            f"2: POSIX  ADVISORY  WRITE 99 {device} 0 EOF\n"
            f"3: FLOCK  ADVISORY  WRITE 5 00:00:1 0 EOF\n")
    assert holder_pids(fd, text) == [4242]
    os.close(fd)


# ---- modes and permissions ----------------------------------------------------------------

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="drops to uid 65534 to be another user: needs root")


def _as_nobody(root, name):
    os.chmod(root, 0o755)  # mkdtemp's 0700 would stop the other user at the directory
    worker = python_worker(f"attach_as_nobody({str(root)!r}, {name!r})")
    out, _ = worker.communicate(timeout=120)
    assert worker.returncode == 0
    return json.loads(out)


@needs_root
def test_an_unreadable_registry_is_a_shm_error_not_a_permission_error(shm_root):
    with TableStore(shm_root, mode=0o600) as store:
        store.publish("t", table_from(SIN, 0, 4))
        outcome = _as_nobody(shm_root, "t")
    assert outcome["error"] == "ShmError" and outcome["field"] == "registry", outcome
    assert "posenc-registry: cannot open: Permission denied" in outcome["message"]


@needs_root
def test_the_registry_becomes_readable_by_whoever_may_read_a_table(shm_root):
    private = TableStore(shm_root, mode=0o600)
    private.publish("secret", table_from(SIN, 0, 4))
    assert os.stat(shm_root / "posenc-registry").st_mode & 0o777 == 0o600
    public = TableStore(shm_root, mode=0o644)
    public.publish("shared", table_from(SIN, 0, 4))
    assert os.stat(shm_root / "posenc-registry").st_mode & 0o777 == 0o644  # read bits added, no write bits
    assert _as_nobody(shm_root, "shared") == {"attached": 2}
    secret = _as_nobody(shm_root, "secret")  # the 0600 table itself stays private
    assert secret["error"] == "ShmError" and secret["field"] == "segment" and "Permission denied" in secret["message"]
    private.publish("secret", table_from(SIN, 0, 5))
    assert os.stat(shm_root / "posenc-registry").st_mode & 0o777 == 0o644  # never narrowed again
    private.close()
    public.close()


@needs_root
def test_a_writer_that_cannot_widen_the_registry_mode_refuses_before_building(shm_root):
    with TableStore(shm_root, mode=0o606) as owner:  # root's registry: others may write it, not chmod it
        owner.publish("t", table_from(SIN, 0, 4))
        os.chmod(shm_root, 0o777)
        worker = python_worker(f"publish_as_nobody({str(shm_root)!r}, 'wide', 0o644)")
        out, _ = worker.communicate(timeout=120)
        outcome = json.loads(out)
        assert outcome["error"] == "ShmError" and outcome["field"] == "mode", outcome
        assert "mode 0644 lets others read the table but not find it" in outcome["message"]
        worker = python_worker(f"publish_as_nobody({str(shm_root)!r}, 'narrow', 0o604)")  # adds no read bits
        out, _ = worker.communicate(timeout=120)
        assert json.loads(out) == {"published": 2}
        assert not any(p.name.startswith("posenc.wide.") for p in shm_root.iterdir())


def test_a_slot_left_odd_is_cleared_by_the_next_writer_and_its_table_reclaimed(shm_root):
    """docs/shm-format.md, "A slot left odd": the table it held is unpublished and its file deleted."""
    worker = python_worker(f"publish_same_name({str(shm_root)!r}, 't', 1, 8)")  # publishes and exits, as the CLI
    generation = json.loads(worker.communicate(timeout=120)[0])["generations"][0]
    fd = os.open(shm_root / "posenc-registry", os.O_RDWR)
    os.pwrite(fd, struct.pack("<Q", 7), 128)  # slot 0's seq odd: a writer died mid-update
    os.close(fd)
    with TableStore(shm_root) as store:  # takes the lock: clears the slot, then reclaims
        with pytest.raises(ShmError, match="no table named 't'"):
            attach("t", root=shm_root)
        assert not (shm_root / f"posenc.t.{generation}").exists()
        assert store.publish("t", table_from(SIN, 0, 4)).generation == generation + 1  # republished


def _poke_registry(root, offset, data):
    fd = os.open(root / "posenc-registry", os.O_RDWR)
    os.pwrite(fd, data, offset)
    os.close(fd)


def test_a_counter_set_back_inside_the_range_never_hands_out_a_generation_again(shm_root):
    """docs/shm-format.md, *Generations*: before, next_generation = 1 handed out 1 again."""
    with TableStore(shm_root) as store:
        store.publish("t", table_from(SIN, 0, 4))
        store.publish("t", table_from(SIN, 0, 5))  # generation 1 is unlinked: only 2 is on disk
        assert store.publish("u", table_from(SIN, 0, 4)).generation == 3
        for value in (1, 2, 3):
            _poke_registry(shm_root, 24, struct.pack("<Q", value))
            generation = store.publish("v", table_from(SIN, 0, 4)).generation
            assert generation > 3, value  # above the directory's highest generation, whatever the counter
        _poke_registry(shm_root, 24, struct.pack("<Q", 100))  # a counter above everything is kept
        assert store.publish("w", table_from(SIN, 0, 4)).generation == 100


def test_a_full_size_registry_whose_magic_is_zero_is_initialised_with_no_table(shm_root):
    """docs/shm-format.md, *Reading the registry* step 3: readers saw no table in it, so the
    writer that initialises it zeroes the slots too; before, the old slots came back."""
    worker = python_worker(f"publish_same_name({str(shm_root)!r}, 't', 2, 8)")  # publishes and exits, as the CLI
    generation = json.loads(worker.communicate(timeout=120)[0])["generations"][-1]
    _poke_registry(shm_root, 0, bytes(8))
    with pytest.raises(ShmError, match="no registry there yet"):
        attach("t", root=shm_root)
    with TableStore(shm_root) as store:
        with pytest.raises(ShmError, match="no table named 't'"):
            attach("t", root=shm_root)
        assert not (shm_root / f"posenc.t.{generation}").exists()  # no longer named: reclaimed
        assert store.publish("u", table_from(SIN, 0, 4)).generation == generation + 1  # counter above the old ones
