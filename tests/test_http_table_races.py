"""PUT and DELETE of one table racing each other, against a real `posenc serve` (1 and 2 workers)
and against the store itself: every answer is 201, 204 or 404, none names the server's shm
directory, and afterwards the registry, the segments and every worker agree on what is published."""

import os
import shutil
import threading
import time

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient
from posenc.config import ServiceConfig
from posenc.http import create_app
from posenc.http.pipeline.budget import MemoryBudget
from posenc.http.runtime.caches import ByteCache
from posenc.http.runtime.table_cache import REFRESH_S, TableCache
from posenc.shm import ShmError, TableStore, attach, list_tables
from posenc.shm.layout import SIZE as REGISTRY_SIZE
from posenc.shm.paths import REGISTRY_FILE
from posenc.tables import TableSpec
from serve_support import served

KEY = "race-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
NAME = "r"
#: Threads that PUT (each its own table, told apart by `stop`) and threads that DELETE, all on NAME.
PUTTERS, DELETERS = 3, 3
#: Requests per thread, and a bound in seconds on the whole race (the machine may be slow and shared).
REQUESTS_PER_THREAD = 150
RACE_S = 4.0
RACED_STATUSES = {201, 204, 404}


def server_config(workers: int):
    def config(shm_dir: str) -> str:
        return f"""
[server]
workers = {workers}
binary_port = 0
shm_dir = "{shm_dir}"
"""
    return config


def table_body(stop: int) -> dict:
    return {"encoding": {"kind": "sinusoidal", "dim": 8}, "start": 0, "stop": stop, "dtype": "float32"}


def expected_row(stop: int, position: int) -> bytes:
    """The row a table of `table_body(stop)` holds at `position`, as raw float32 bytes."""
    spec = TableSpec.from_dict(table_body(stop))
    return spec.compute(np.array([position]), np.dtype(np.float32))[0].tobytes()


def segments(shm_dir: str) -> list[str]:
    return sorted(f for f in os.listdir(shm_dir) if f.startswith("posenc."))


def race(url: str) -> list[tuple[str, int, str]]:
    """(method, status, body) of every request of PUTTERS + DELETERS threads in tight loops on NAME."""
    answers: list[tuple[str, int, str]] = []
    deadline = time.monotonic() + RACE_S
    start = threading.Barrier(PUTTERS + DELETERS)

    def loop(method: str, stop: int) -> None:
        mine = []
        with httpx.Client(base_url=url, headers=AUTH, timeout=30) as client:
            start.wait()
            for _ in range(REQUESTS_PER_THREAD):
                if time.monotonic() > deadline:
                    break
                if method == "PUT":
                    reply = client.put(f"/v1/tables/{NAME}", json=table_body(stop))
                else:
                    reply = client.delete(f"/v1/tables/{NAME}")
                mine.append((method, reply.status_code, reply.text))
        answers.extend(mine)

    threads = [threading.Thread(target=loop, args=("PUT", 16 + i)) for i in range(PUTTERS)]
    threads += [threading.Thread(target=loop, args=("DELETE", 0)) for _ in range(DELETERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def assert_raced_cleanly(answers: list[tuple[str, int, str]], shm_dir: str) -> None:
    outcomes = {}
    for method, status, _ in answers:
        outcomes[method, status] = outcomes.get((method, status), 0) + 1
    wrong = [(method, status, body) for method, status, body in answers
             if status not in RACED_STATUSES or (method == "PUT") != (status == 201)]
    assert not wrong, f"{len(wrong)} of {len(answers)} answers wrong ({outcomes}), e.g. {wrong[:3]}"
    leaking = [body for _, _, body in answers if shm_dir in body]
    assert not leaking, f"{len(leaking)} answers name the shm directory, e.g. {leaking[:3]}"
    assert outcomes.get(("PUT", 201)) and outcomes.get(("DELETE", 204)), f"no race happened: {outcomes}"


def assert_consistent(root: str) -> None:
    """The registry names one READY segment or none, and no other segment is left."""
    infos = list_tables(root)
    assert [info.state for info in infos] in ([], ["READY"]), infos
    assert segments(root) == [info.segment for info in infos]


def assert_published(shm_dir: str, stop: int | None) -> None:
    """Exactly one READY segment, of NAME, holding `stop` positions (none if `stop` is None)."""
    infos = list_tables(shm_dir)
    if stop is None:
        assert infos == [] and segments(shm_dir) == [], (infos, segments(shm_dir))
        return
    assert [(i.name, i.state, i.shape[0]) for i in infos] == [(NAME, "READY", stop)], infos
    assert segments(shm_dir) == [infos[0].segment]


def rows_from_every_worker(url: str, position: int, expected: tuple[int, bytes | None],
                           connections: int = 12) -> set[tuple[int, bytes | None]]:
    """The (status, raw row or None) of GET .../rows/{position} on fresh connections (the kernel
    spreads them over the workers), once all are `expected` or after three refreshes (a worker
    that made no change follows the others within one)."""
    deadline = time.monotonic() + 3 * REFRESH_S
    while True:
        answers = []
        for _ in range(connections):
            with httpx.Client(base_url=url, timeout=30) as client:
                reply = client.get(f"/v1/tables/{NAME}/rows/{position}",
                                   headers={"Accept": "application/octet-stream"})
                answers.append((reply.status_code, reply.content if reply.status_code == 200 else None))
        if set(answers) == {expected} or time.monotonic() > deadline:
            return set(answers)
        time.sleep(0.1)


def deleted_files_held(root: str, pids: list[int | str] = ("self",)) -> list[str]:
    """Files under `root` that processes `pids` hold open after they were unlinked (their memory
    is not freed): a build lock, or a mapping (Python's mmap keeps a descriptor)."""
    held = []
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue  # exited
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue  # closed since the listing (the listing's own, for one)
            if target.startswith(root + "/") and target.endswith(" (deleted)"):
                held.append(target)
    return held


def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants (a server's workers)."""
    parents = {}
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as stat:
                parents[int(entry)] = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    tree = [pid]
    for member in tree:
        tree += [child for child, parent in parents.items() if parent == member]
    return tree


def assert_workers_let_go(server) -> None:
    """Within three refreshes no process of the server holds a segment that was unlinked."""
    deadline = time.monotonic() + 3 * REFRESH_S
    while (held := deleted_files_held(server.shm_dir, process_tree(server.process.pid))) \
            and time.monotonic() < deadline:
        time.sleep(0.1)
    assert held == []


@pytest.mark.parametrize("workers", [1, 2])
def test_put_racing_delete_answers_201_204_404_and_leaves_the_store_consistent(workers):
    with served(server_config(workers), env={"POSENC_API_KEY": KEY}, prefix="posenc-race-test-",
                clean_exit=True) as server:
        answers = race(server.url)
        assert_raced_cleanly(answers, server.shm_dir)
        assert_consistent(server.shm_dir)
        assert_workers_let_go(server)
        with httpx.Client(base_url=server.url, headers=AUTH, timeout=30) as client:
            # whatever the race left, one more PUT publishes exactly its table, in every worker
            assert client.put(f"/v1/tables/{NAME}", json=table_body(40)).status_code == 201
            assert client.get(f"/v1/tables/{NAME}").json()["shape"] == [40, 8]
            assert_published(server.shm_dir, 40)
            row = (200, expected_row(40, 39))
            assert rows_from_every_worker(server.url, 39, row) == {row}
            # and one DELETE removes it, segment and all
            assert client.delete(f"/v1/tables/{NAME}").status_code == 204
            assert client.get(f"/v1/tables/{NAME}").status_code == 404
            assert client.delete(f"/v1/tables/{NAME}").status_code == 404
            assert_published(server.shm_dir, None)
            assert rows_from_every_worker(server.url, 39, (404, None)) == {(404, None)}
        assert_workers_let_go(server)




@pytest.fixture
def root(tmp_path):
    path = "/dev/shm/posenc-race-" + tmp_path.name
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_store_lets_go_of_tables_another_store_removed_or_replaced(root):
    """Worker A publishes, worker B deletes or replaces: A's build lock on the unlinked segment
    kept its memory until A happened to publish that name again. A service's refresh lets go."""
    publisher, other = TableStore(root), TableStore(root)
    try:
        publisher.publish(NAME, TableSpec.from_dict(table_body(16)))
        publisher.publish("s", TableSpec.from_dict(table_body(16)))
        assert publisher.release_superseded() == 0
        other.remove(NAME)
        other.publish("s", TableSpec.from_dict(table_body(17)))
        assert len(deleted_files_held(root)) == 2
        assert publisher.release_superseded() == 2
        assert deleted_files_held(root) == []
        assert [(info.name, info.shape[0]) for info in list_tables(root)] == [("s", 17)]
    finally:
        publisher.close()
        other.close()
    assert segments(root) == []


def test_store_publish_racing_remove_keeps_registry_and_segments_consistent(root):
    """Two stores (two workers), three threads each (two publish, one removes): after the race the
    registry names a READY segment or nothing, no other segment is left, and no store holds a
    generation someone else removed or replaced."""
    stores = [TableStore(root), TableStore(root)]
    deadline = time.monotonic() + 3.0
    failures = []

    def loop(store: TableStore, publishing: bool, stop: int) -> None:
        for _ in range(300):
            if time.monotonic() > deadline:
                return
            try:
                if publishing:
                    store.publish(NAME, TableSpec.from_dict(table_body(stop)))
                else:
                    store.remove(NAME)
            except ShmError as exc:  # removing a table that is gone is the one refusal a race may cause
                if publishing or not exc.message.startswith(f"no table named {NAME!r}"):
                    failures.append(exc)

    try:
        threads = [threading.Thread(target=loop, args=(store, publishing, 16 + 2 * i + publishing))
                   for i, store in enumerate(stores) for publishing in (True, True, False)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failures == []
        assert_consistent(root)
        for store in stores:
            store.reclaim()
        assert deleted_files_held(root) == []
        stores[1].publish(NAME, TableSpec.from_dict(table_body(40)))
        with attach(NAME, root=root) as table:
            assert table.array.shape == (40, 8)
    finally:
        for store in stores:
            store.close()
    assert segments(root) == []


def test_a_worker_never_holds_a_table_removed_while_it_was_mapping_it(root):
    """A worker maps a table (a refresh, or the attach after its PUT) while a DELETE removes it:
    whichever finishes first, the worker holds no table the registry no longer names."""
    store = TableStore(root)
    try:
        store.publish(NAME, TableSpec.from_dict(table_body(16)))
        cache = TableCache(root, ByteCache(MemoryBudget(1 << 20), 1 << 16))
        mapped = cache.scan()  # mapped, not yet held
        store.remove(NAME)
        cache.forget(NAME)  # the DELETE's answer is sent here
        cache.apply(mapped)
        assert NAME not in cache
        store.publish(NAME, TableSpec.from_dict(table_body(16)))
        mapped = cache.scan()
        store.publish(NAME, TableSpec.from_dict(table_body(17)))  # replaced meanwhile, by another worker
        held = cache.attach(NAME)  # this worker's PUT
        cache.apply(mapped)  # the older mapping lands last
        assert cache.get(NAME) is held and held.stop == 17
    finally:
        store.close()


def test_no_answer_names_the_shm_directory(root, caplog):
    """Every shared-memory refusal the table routes pass on (here: a registry that is not one)
    reaches the client without the server's directory; the server's log keeps it."""
    os.makedirs(root)
    with open(os.path.join(root, REGISTRY_FILE), "wb") as registry:
        registry.write(b"garbage!" + bytes(REGISTRY_SIZE - 8))
    config = ServiceConfig.from_dict({"server": {"shm_dir": root}, "api_key": KEY})
    with TestClient(create_app(config)) as client:
        answers = [client.put(f"/v1/tables/{NAME}", json=table_body(16), headers=AUTH),
                   client.delete(f"/v1/tables/{NAME}", headers=AUTH),
                   client.get("/v1/tables"), client.get(f"/v1/tables/{NAME}"),
                   client.get(f"/v1/tables/{NAME}/rows/1")]
    for answer in answers:
        assert 400 <= answer.status_code < 500 and root not in answer.text, answer.text
        assert answer.json()["error"]["message"]
    assert "posenc-registry: bad magic" in answers[0].json()["error"]["message"]
    assert f"{root}/posenc-registry: bad magic" in caplog.text
