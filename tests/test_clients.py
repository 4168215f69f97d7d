"""The language clients (clients/go, clients/java) against a live posenc-server and published tables, the
same way for every language (contract: tests/clients/README.md): one case list built from the library
(tests/clients/cases.py), each case's answer bit for bit, and the scenarios a service meets (many
goroutines or threads on one pool, a reconnect after an idle close and a server restart, the drain at
SIGTERM, a table replaced while read through shared memory, the shared-memory reader's checks).

A language whose toolchain or client directory is missing fails: `make test` installs the toolchains.
The Python client runs the case list too, first: it checks that the cases say what the server says."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import queue
import shutil
import struct
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import posenc
import pytest
from binary_support import running_server, table_store
from posenc.client import Client, ServerError, fetch_stats, start_server
from posenc.client.calls import Call
from posenc.client.protocol import Opcode, Reply, wire_dtype
from posenc.shm import TableStore, attach
from posenc.shm.paths import segment_file
from posenc.tables import TableSpec
from shm_support import CORRUPTIONS, header_of

from clients import cases as case_list

ROOT = Path(__file__).resolve().parents[1]
CLIENTS = ROOT / "clients"
LANGUAGES = ("go", "java")
#: The command each language's scripts need (Debian's golang-go and default-jdk-headless; Makefile CLIENT_TOOLS).
TOOLCHAINS = {"go": "go", "java": "javac"}
#: The first run of a language builds its client (go build, mvn -o) before it runs.
FIRST_RUN_S = 300
#: The table the shm-replace scenario reads while it is replaced, alternating between two specs.
FLIP = "flip"
FLIP_SPECS = (TableSpec(posenc.SinusoidalSpec(64), 0, 2048), TableSpec(posenc.SinusoidalSpec(64, base=777.0), 0, 2048))


# --- running a language's scripts ------------------------------------------------------------------

def client_command(language: str, script: str, *args) -> list[str]:
    """`clients/<language>/<script> ARGS...`; fails (never skips) without the toolchain or the script."""
    tool = TOOLCHAINS[language]
    if shutil.which(tool) is None:
        pytest.fail(f"{language}: `{tool}` is not on PATH (`make test` installs it: Makefile CLIENT_PACKAGES)")
    path = CLIENTS / language / script
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path.relative_to(ROOT)} is missing or not executable")
    return [str(path), *map(str, args)]


def json_lines(stdout: str, where: str) -> list[dict]:
    """stdout of a runner: JSON objects only, one a line."""
    lines = []
    for line in stdout.splitlines():
        try:
            lines.append(json.loads(line))
        except json.JSONDecodeError:
            pytest.fail(f"{where}: a stdout line that is not JSON: {line[:300]!r}")
    return lines


class Scenario:
    """A running `run-scenario NAME ADDRESS SHM_DIR`: its stdout lines as they come, a line to its stdin."""

    def __init__(self, language: str, name: str, address: str, shm_dir):
        self.where = f"{language} {name}"
        self.process = subprocess.Popen(client_command(language, "run-scenario", name, address, shm_dir),
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True)
        self.lines: queue.Queue = queue.Queue()  # stdout lines, then None at its end
        self.stderr: list[str] = []
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=lambda: self.stderr.extend(self.process.stderr), daemon=True).start()

    def _read_stdout(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def next_line(self, timeout: float) -> dict | None:
        """The next JSON line, or None at the end of its output."""
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            self.kill()
            pytest.fail(f"{self.where}: nothing on stdout for {timeout} s; stderr:\n{self.log()}")
        return None if line is None else json_lines(line, self.where)[0]

    def wait_event(self, event: str, timeout: float = FIRST_RUN_S) -> dict:
        line = self.next_line(timeout)
        if line is None or line.get("event") != event:
            self.kill()
            pytest.fail(f"{self.where}: expected {{'event': {event!r}}}, got {line}; stderr:\n{self.log()}")
        return line

    def send(self, line: str = "go") -> None:
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def result(self, timeout: float = 60) -> dict:
        """Closes stdin, reads to the end; the last line, which must say ok."""
        self.process.stdin.close()
        lines = []
        while (line := self.next_line(timeout)) is not None:
            lines.append(line)
        status = self.process.wait(timeout)
        assert lines and status == 0 and lines[-1].get("ok") is True, \
            f"{self.where}: exit {status}, output {lines[-3:]}; stderr:\n{self.log()}"
        return lines[-1]

    def log(self) -> str:
        return "".join(self.stderr)[-4000:]

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


# --- the tables and the case list ------------------------------------------------------------------

@pytest.fixture(scope="module")
def shm_dir():
    """A private shm directory with the case list's tables (the corrupt ones corrupted)."""
    with table_store({}) as (store, root):
        case_list.publish(store)
        yield root


@pytest.fixture(scope="module")
def case_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("clients") / "cases.json"
    case_list.write(path)
    return path


@pytest.fixture(scope="module")
def cases(case_file) -> list[dict]:
    return json.loads(case_file.read_text())["cases"]


def expected_errors(cases: list[dict]) -> Counter:
    """STATS `errors` after a runner went through the list: one per error case (none for a refusal)."""
    return Counter(case["expect"]["error"]["name"].lower() for case in cases if "error" in case["expect"])


def server_errors(address: str) -> Counter:
    return Counter({name: n for name, n in fetch_stats(address)["errors"].items() if n})


# --- the Python client checks the list against the server ------------------------------------------

def python_call(client: Client, case: dict):
    """What posenc.client answers for a case that reaches the server."""
    op = case["op"]
    if op == "ping":
        return client.ping(bytes.fromhex(case["payload_hex"]))
    if op in ("stats", "list_tables"):
        return getattr(client, op)()
    if op == "resolve":
        return client.resolve(case["table"])
    if "positions_bits" in case:
        positions = np.array([struct.unpack(">d", bytes.fromhex(b))[0] for b in case["positions_bits"]])
    else:
        positions = np.array(case["positions"], dtype=np.int64)
    if op == "encode_table":
        return client.encode(case.get("table") or case["table_id"], positions, dtype=case["dtype"])
    spec = case["spec"]
    aux = struct.pack("<IIIIII", *(spec[k] for k in ("n_freq", "row_width", "sin_base", "cos_base", "n_cos", "flags")))
    aux += b"".join(bytes.fromhex(b)[::-1] for b in [spec["amplitude_bits"], *spec["freqs_bits"],
                                                    *spec.get("scale_bits", [])])
    kind = 0 if positions.dtype == np.int64 else 1
    return client.call(Call(Opcode.ENCODE_SPEC, Reply.array, aux=aux, positions=positions.astype("<i8" if kind == 0
                                                                                                  else "<f8").tobytes(),
                            count=len(positions), dtype=wire_dtype(case["dtype"]), position_kind=kind))


def python_outcome_problem(case: dict, outcome) -> str | None:
    """Why the Python client's outcome is not what the case expects, or None."""
    expect = case["expect"]
    if "error" in expect:
        want = expect["error"]
        if not isinstance(outcome, ServerError):
            return f"expected {want['name']}, got {type(outcome).__name__}"
        if (int(outcome.status), outcome.field) != (want["status"], want["field"]) \
                or want["message_contains"] not in outcome.message:
            return f"expected {want}, got {int(outcome.status)} {outcome.field}: {outcome.message}"
        return None
    if isinstance(outcome, Exception):
        return f"{type(outcome).__name__}: {outcome}"
    if "data_hex" in expect:
        got = (outcome.shape[0], outcome.shape[1], outcome.dtype.name, outcome.tobytes().hex())
        return None if got == tuple(expect[k] for k in ("rows", "width", "dtype", "data_hex")) else "rows differ"
    if "payload_hex" in expect:
        return None if outcome.hex() == expect["payload_hex"] else "payload differs"
    if "table" in expect:
        got = {key: getattr(outcome, key, None) for key in expect["table"]}
        got["computed"], got["spec_hash"] = outcome.spec.get("computed", False), TableSpec.from_dict(outcome.spec).hash
        return None if got == expect["table"] else f"{got} != {expect['table']}"
    if "tables" in expect:
        got = [{"name": t["name"], **({"error_contains": "data checksum mismatch"} if "error" in t else
                                      {"computed": t["computed"]})} for t in outcome]
        return None if got == expect["tables"] else f"{got} != {expect['tables']}"
    subset = expect["json_subset"]
    got = {k: ({kk: outcome[k][kk] for kk in v} if isinstance(v, dict) else outcome[k]) for k, v in subset.items()}
    return None if got == subset else f"{got} != {subset}"


def test_the_case_list_is_what_the_server_answers(cases, shm_dir):
    """Every case that reaches the server, through posenc.client: the expectations are the server's
    answers (so a language client that fails a case is wrong, not the list)."""
    problems = []
    with running_server(shm_dir, **case_list.SERVER_FLAGS) as server, Client(server.address) as client:
        for case in cases:
            if "refused_locally" in case["expect"] or "positions_range" in case:
                continue
            try:
                outcome = python_call(client, case)
            except ServerError as exc:
                outcome = exc
            if problem := python_outcome_problem(case, outcome):
                problems.append(f"{case['id']}: {problem}")
        assert server_errors(server.address) == expected_errors(cases)
    assert not problems, "\n".join(problems[:20])
    assert len(cases) > 140 and {c["op"] for c in cases} == {"ping", "resolve", "encode_table", "encode_spec",
                                                            "list_tables", "stats"}


def test_the_case_file_is_what_cases_py_writes(tmp_path):
    """The documented command line writes the list the tests use."""
    out = tmp_path / "cases.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "service")}
    subprocess.run([sys.executable, str(ROOT / "tests" / "clients" / "cases.py"), "--out", str(out)],
                   check=True, env=env, capture_output=True)
    assert json.loads(out.read_text()) == case_list.all_cases()


# --- each language: the case list -----------------------------------------------------------------

@pytest.mark.parametrize("language", LANGUAGES)
def test_the_client_passes_the_case_list(language, case_file, cases, shm_dir):
    """Every case reported ok, each once; the server counted exactly the errors the error cases ask
    for (so nothing a client should refuse reached it)."""
    with running_server(shm_dir, **case_list.SERVER_FLAGS) as server:
        done = subprocess.run(client_command(language, "run-cases", case_file, server.address, shm_dir),
                              check=False, capture_output=True, text=True, timeout=FIRST_RUN_S)
        assert done.returncode == 0, f"run-cases exit {done.returncode}:\n{done.stderr[-4000:]}"
        reports = json_lines(done.stdout, f"{language} run-cases")
        errors = server_errors(server.address)
    ids = [r.get("id") for r in reports]
    assert Counter(ids) == Counter(c["id"] for c in cases), "every case reported exactly once"
    failed = [f"{r['id']}: {r.get('detail')}" for r in reports if r.get("ok") is not True]
    assert not failed, f"{len(failed)} of {len(cases)} cases failed:\n" + "\n".join(failed[:30])
    assert errors == expected_errors(cases)


# --- each language: the scenarios ------------------------------------------------------------------

@pytest.mark.parametrize("language", LANGUAGES)
def test_many_workers_share_one_pool(language, shm_dir):
    """`concurrency`: workers on one pool of at most pool_size connections, every row checked."""
    with running_server(shm_dir) as server:
        scenario = Scenario(language, "concurrency", server.address, shm_dir)
        result = scenario.result(timeout=FIRST_RUN_S)
        accepted = fetch_stats(server.address)["connections"]["accepted"] - 1  # less fetch_stats' own
    assert result["workers"] >= 16 and result["requests"] >= 2000 and result["rows_checked"] >= result["requests"]
    assert 1 <= accepted <= result["pool_size"] <= 8, (accepted, result)


def resolve_others_first(address: str) -> None:
    """On a restarted server, give other tables the first ids, so a client that kept sin128's old id
    would read another table."""
    with Client(address) as client:
        for name in ("t2t-33", "llama3.1", "sin128-any", "llama3.1-any"):
            client.resolve(name)


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_client_reconnects_after_an_idle_close_and_a_restart(language, shm_dir):
    """`reconnect`: the server closes the pooled connection after 1 s idle (IDLE_TIMEOUT), and is then
    restarted on the same port while the runner waits; its next calls succeed, with ids resolved again."""
    with running_server(shm_dir, idle_timeout_ms=1000) as first:
        port = int(first.address.rpartition(":")[2])
        scenario = Scenario(language, "reconnect", first.address, shm_dir)
        scenario.wait_event("ready")
        assert fetch_stats(first.address)["connections"]["idle_closed"] >= 1
    with start_server(port=port, shm_dir=str(shm_dir), threads=2) as second:
        resolve_others_first(second.address)
        scenario.send()
        result = scenario.result()
    assert result["calls_after_restart"] >= 1


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_drain_answers_every_request_then_ends_cleanly(language, shm_dir):
    """`drain`: SIGTERM while the runner pipelines; every request it wrote is answered, then EOF."""
    with running_server(shm_dir, threads=1) as server:
        scenario = Scenario(language, "drain", server.address, shm_dir)
        scenario.wait_event("ready")
        server.process.send_signal(15)
        scenario.send()
        result = scenario.result()
        assert server.process.wait(10) == 0
    assert result["sent"] == result["answered"] >= 100 and result["end"] == "eof"


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_table_replaced_while_read_through_shared_memory(language, tmp_path):
    """`shm-replace`: FLIP is republished, alternating two specs, while the runner reads rows of its
    mapping and follows the registry; no row differs from its generation's verified data, both specs
    and several generations are seen, and each spec's data is the library's."""
    store = TableStore(tmp_path)
    try:
        store.publish(FLIP, FLIP_SPECS[0])
        scenario = Scenario(language, "shm-replace", "-", tmp_path)
        scenario.wait_event("ready")
        for k in range(1, 13):
            store.publish(FLIP, FLIP_SPECS[k % 2])
            time.sleep(0.05)
        scenario.send("stop")
        result = scenario.result()
    finally:
        store.close()
    library = {spec.hash: case_list.library_rows(spec.encoding, np.arange(spec.start, spec.stop), spec.dtype)
               for spec in FLIP_SPECS}
    assert set(result["digests"]) == set(library), result["digests"]
    for spec_hash, digest in result["digests"].items():
        assert digest == hashlib.sha256(library[spec_hash].tobytes()).hexdigest(), spec_hash
    assert len(result["generations"]) >= 3 and result["rows_read"] > 0 and result["old_rechecked"] >= 1


@contextlib.contextmanager
def shm_requests(root: Path):
    """(request, what the reply must say) for the shm-read scenario, their tables published in `root`
    until the block ends: the case tables' rows, a CRC-32 table, a computed table's header, every
    corruption of tests/shm_support.CORRUPTIONS (one table each), and names that are not there or not names."""
    crc32_table = TableSpec(posenc.SinusoidalSpec(16), 0, 64)
    with contextlib.closing(TableStore(root)) as store, \
            contextlib.closing(TableStore(root, checksum="crc32")) as crc32_store:
        case_list.publish(store)
        crc32_store.publish("sin16-crc32", crc32_table)
        asks = []
        for name, table in {**case_list.TABLES, "sin16-crc32": crc32_table}.items():
            with attach(name, root=root) as tbl:
                if table.computed:
                    asks.append(({"table": name, "positions": []}, {"ok": True, "dtype": "computed"}))
                    asks.append(({"table": name, "positions": [0]}, {"ok": False, "field": "positions",
                                                                    "error_contains": "computed"}))
                    continue
                positions = [table.start, table.start + 1, table.stop - 1]
                asks.append(({"table": name, "positions": positions}, {
                    "ok": True, "dtype": table.dtype, "generation": tbl.generation, "start": table.start,
                    "rows": table.rows, "width": table.width, "spec_hash": table.hash,
                    "checksum": "crc32" if name == "sin16-crc32" else "crc32c",
                    "data_hex": tbl.lookup(positions).tobytes().hex()}))
                asks.append(({"table": name, "positions": [table.stop]}, {"ok": False, "field": "positions",
                                                                          "error_contains": "outside"}))
        small = TableSpec(posenc.SinusoidalSpec(8), 0, 16)
        for case_id, corrupt, phrase, _ in CORRUPTIONS:
            name = f"c-{case_id}"
            info = store.publish(name, small)
            path = root / segment_file(name, info.generation)
            corrupt(path, header_of(path))
            asks.append(({"table": name, "positions": [0]}, {"ok": False, "field": "segment", "error_contains": phrase}))
        asks.append(({"table": "c-data", "positions": [0], "verify": False}, {"ok": True, "dtype": "float32"}))
        asks.append(({"table": "no-such-table", "positions": [0]}, {"ok": False, "field": "name",
                                                                     "error_contains": "no table named 'no-such-table'"}))
        asks.append(({"table": "a/b", "positions": [0]}, {"ok": False, "field": "name"}))
        yield asks


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_shared_memory_reader(language, tmp_path):
    """`shm-read`: rows bit for bit the Python reader's, every check of docs/shm-format.md in its order
    (each corruption is refused with the doc's words), both data checksums verified."""
    with shm_requests(tmp_path) as asks:
        scenario = Scenario(language, "shm-read", "-", tmp_path)
        for request, _ in asks:
            scenario.send(json.dumps({"verify": True, **request}))
        scenario.process.stdin.close()
        replies = []
        while (line := scenario.next_line(FIRST_RUN_S)) is not None:
            replies.append(line)
        assert scenario.process.wait(30) == 0, scenario.log()
    assert len(replies) == len(asks), (len(replies), len(asks), scenario.log())
    problems = []
    for (request, want), got in zip(asks, replies):
        contains = want.get("error_contains")
        mismatched = {k: got.get(k) for k, v in want.items() if k != "error_contains" and got.get(k) != v}
        if mismatched or (contains and contains not in (got.get("error") or "")):
            problems.append(f"{request['table']}: want {want}, got {got}")
    assert not problems, "\n".join(problems)
