"""Helpers for the shared-memory tests: fixtures (`shm_root`, `shm_store`; test modules load
them with `pytest_plugins = ["shm_support"]`), the float64 oracle of a published table,
segment corruption, and the worker processes of the safety tests (run as
`python -c "import shm_support; shm_support.<worker>(...)"` with tests/ on the path).

PYTEST_DONT_REWRITE: test modules import it before pytest loads it as a plugin; its asserts
run mostly in worker processes, where rewriting does not apply anyway."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_matches_oracle, compile_c_test, ulp_tolerance
from posenc import reference
from posenc.config import ServiceConfig
from posenc.shm import TableStore, attach
from posenc.tables import TableSpec

TESTS = Path(__file__).parent


@pytest.fixture
def shm_root():
    """A private shm directory on tmpfs (/dev/shm when there is one), removed afterwards."""
    parent = "/dev/shm" if os.path.isdir("/dev/shm") else None
    path = Path(tempfile.mkdtemp(prefix="posenc-test-", dir=parent))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@contextmanager
def published_config(prefix: str, config_of: Callable[[str], ServiceConfig]):
    """(config, store): the service config `config_of(root)` on a fresh shm directory, its
    [[tables]] already published as `posenc serve` would have them (the store publishes more);
    the tables and the directory are removed afterwards."""
    root = tempfile.mkdtemp(prefix=prefix, dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    store = TableStore(root)
    try:
        config = config_of(root)
        for table in config.tables:
            store.publish(table.name, table.spec)
        yield config, store
    finally:
        store.close()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def shm_store(shm_root):
    """A TableStore on `shm_root`, closed afterwards."""
    store = TableStore(shm_root)
    yield store
    store.close()


@pytest.fixture(scope="session")
def shm_c_reader(tmp_path_factory):
    """tests/c/shm_reader_test.c compiled against native/include/posenc_shm.h (skips without a C compiler)."""
    return compile_c_test(tmp_path_factory, "shm_reader_test.c", "-Wextra")


def run_c_reader(exe, *args) -> tuple[int, list[str]]:
    """(exit status, stdout lines) of the compiled C reader."""
    proc = subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=60, check=False)
    return proc.returncode, proc.stdout.splitlines()


def table_from(encoding: dict, start: int, stop: int, dtype: str = "float32") -> TableSpec:
    return TableSpec.from_dict({"encoding": encoding, "start": start, "stop": stop, "dtype": dtype})


def oracle_rows(table: TableSpec, positions=None) -> np.ndarray:
    """float64 rows of `table` for absolute positions (default: all of them), from posenc.reference."""
    positions = np.arange(table.start, table.stop) if positions is None else np.asarray(positions)
    enc = table.encoding
    if table.kind == "sinusoidal":
        return reference.sinusoidal(positions, enc.dim, base=enc.base, layout=enc.layout)
    inv_freq, attention = enc.inv_freq(table.seq_len)
    cos, sin = reference.rope_cos_sin(positions, inv_freq, attention)
    return np.concatenate([cos, sin], axis=1)


def assert_table_rows(actual, table: TableSpec, positions=None) -> None:
    expected = oracle_rows(table, positions)
    top = max(abs(table.start), abs(table.stop))
    assert_matches_oracle(actual, expected, table.dtype, angle_max=float(top))


def poke(path: Path, offset: int, data: bytes) -> None:
    """Overwrite bytes of a segment file in place (what a corrupting process would do)."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, data, offset)
    finally:
        os.close(fd)


def python_worker(call: str, env: dict | None = None, **popen) -> subprocess.Popen:
    """Start `python -c "import shm_support; shm_support.<call>"` in a fresh interpreter, with
    `env` added to the environment."""
    env = dict(os.environ, **(env or {}), PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen([sys.executable, "-c", f"import shm_support; shm_support.{call}"], env=env,
                            stdout=subprocess.PIPE, text=True, **popen)


# ---- workers (run in child processes) -------------------------------------------------------

def republish_loop(root: str, name: str, specs_json: str, stop_file: str) -> None:
    """Replace table `name` over and over, alternating between the given table specs, until
    `stop_file` exists (or 120 s passed)."""
    tables = [TableSpec.from_dict(d) for d in json.loads(specs_json)]
    store = TableStore(root)
    deadline = time.monotonic() + 120
    published = 0
    while not os.path.exists(stop_file) and time.monotonic() < deadline:
        store.publish(name, tables[published % len(tables)])
        published += 1
    store.close()
    print(json.dumps({"published": published}), flush=True)


def read_loop(root: str, name: str, specs_json: str, seconds: float) -> None:
    """Attach `name` again and again; check every row read against the oracle of the spec the
    segment says it holds (which must be one of `specs_json`). Re-checks a few old mappings
    after the writer has unlinked them. Prints a JSON summary; any mismatch raises."""
    tables = [TableSpec.from_dict(d) for d in json.loads(specs_json)]
    oracles = {t.hash: oracle_rows(t) for t in tables}
    tolerances = {t.hash: ulp_tolerance(oracles[t.hash], t.dtype, angle_max=float(t.stop)) for t in tables}

    def check(rows, tbl, positions=None):
        """Every value within the oracle's tolerance (assert_matches_oracle, bounds precomputed)."""
        expected, tolerance = oracles[tbl.spec.hash], tolerances[tbl.spec.hash]
        if positions is not None:
            expected, tolerance = expected[positions - tbl.start], tolerance[positions - tbl.start]
        bad = np.abs(rows - expected) > tolerance
        assert not bad.any(), f"generation {tbl.generation}: {int(bad.sum())} values off the oracle"
        return rows.shape[0]

    rng = np.random.default_rng(os.getpid())
    held, generations, attaches, rows_checked = [], set(), 0, 0
    with attach(name, root=root) as warm:  # compile (numba) before the clock starts: a cold cache takes seconds
        check(warm.lookup([warm.start]), warm, np.array([warm.start]))
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        tbl = attach(name, root=root)
        attaches += 1
        generations.add(tbl.generation)
        assert tbl.spec.hash in oracles, f"generation {tbl.generation} holds a spec of neither table"
        positions = rng.integers(tbl.start, tbl.stop, 256)
        rows_checked += check(tbl.array, tbl) + check(tbl.lookup(positions), tbl, positions)
        held.append(tbl)
        if len(held) > 8:  # long-replaced generations: their mappings must still be intact
            old = held.pop(0)
            rows_checked += check(old.array, old)
            old.close()
    print(json.dumps({"attaches": attaches, "generations": len(generations), "rows_checked": rows_checked}),
          flush=True)


def stalled_build(root: str, name: str, table_json: str) -> None:
    """Start publishing a table, say so on stdout after the first block, then hang (to be killed)."""
    def progress(done, total):
        print(json.dumps({"building": done, "of": total}), flush=True)
        time.sleep(600)

    TableStore(root).publish(name, TableSpec.from_dict(json.loads(table_json)), progress=progress)


def attach_and_exit(root: str, name: str) -> None:
    """A reader that attaches, reads and exits without closing anything."""
    tbl = attach(name, root=root)
    print(json.dumps({"generation": tbl.generation, "row0": tbl.lookup([tbl.start])[0, :2].tolist(),
                      "resource_tracker": "multiprocessing.resource_tracker" in sys.modules}), flush=True)


# ---- segment surgery (tests of the readers' checks) ----------------------------------------

#: Header fields by name: (offset, struct format), as docs/shm-format.md lists them.
HEADER_FIELDS = {
    "magic": (0, "8s"), "version": (8, "<I"), "state": (12, "<I"), "header_crc": (16, "<I"),
    "data_crc": (20, "<I"), "dtype": (24, "<I"), "itemsize": (28, "<I"), "rows": (32, "<Q"), "width": (40, "<Q"),
    "start": (48, "<q"), "data_offset": (56, "<Q"), "data_nbytes": (64, "<Q"), "generation": (72, "<Q"),
    "spec_len": (92, "<I"), "spec_hash": (96, "16s"), "name": (112, "64s"), "checksum": (176, "<I"),
}


def header_field(path: Path, field: str):
    offset, fmt = HEADER_FIELDS[field]
    with open(path, "rb") as f:
        f.seek(offset)
        return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]


def rewrite_header(path: Path, **fields) -> None:
    """Set header fields, then store a header CRC that matches again (a corruption that only
    the consistency checks can catch, as a hostile or buggy writer would leave it)."""
    for field, value in fields.items():
        offset, fmt = HEADER_FIELDS[field]
        poke(path, offset, struct.pack(fmt, value))
    fix_header_crc(path)


def fix_header_crc(path: Path) -> None:
    """Recompute header_crc as the doc defines it: CRC-32 of the header with bytes 12..19
    zeroed, continued over spec_len bytes of spec JSON."""
    raw = bytearray(path.read_bytes()[:4096])
    spec_len = struct.unpack_from("<I", raw, 92)[0]
    header = bytes(raw[:12]) + bytes(8) + bytes(raw[20:256])
    poke(path, 16, struct.pack("<I", zlib.crc32(bytes(raw[256:256 + spec_len]), zlib.crc32(header))))


def rewrite_spec(path: Path, spec_json: bytes, spec_hash: str | None = None) -> None:
    """Store other spec bytes in a segment, as another writer could: spec_len, data_offset
    and the padding follow them, the data moves with data_offset, and spec_hash (by default
    the doc's: SHA-256 of exactly these bytes) and header_crc match again."""
    raw = path.read_bytes()
    spec_len, data_offset = struct.unpack_from("<I", raw, 92)[0], struct.unpack_from("<Q", raw, 56)[0]
    new_offset = -(-(256 + len(spec_json)) // 64) * 64
    digest = hashlib.sha256(spec_json).hexdigest()[:16] if spec_hash is None else spec_hash
    header = bytearray(raw[:256])
    struct.pack_into("<Q", header, 56, new_offset)
    struct.pack_into("<I", header, 92, len(spec_json))
    header[96:112] = digest.encode()
    path.write_bytes(bytes(header) + spec_json.ljust(new_offset - 256, b"\0") + raw[data_offset:])
    fix_header_crc(path)


def _append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


_INT64_MAX = (1 << 63) - 1

#: (id, corrupt(path, header), phrase every reader's refusal contains, C reader code). `header`
#: is the published segment's fields; each corruption keeps the header CRC valid unless it
#: is the CRC being tested, so every check is reached on its own.
CORRUPTIONS = [
    ("magic", lambda p, h: rewrite_header(p, magic=b"POSENCXX"), "bad magic", -5),
    ("version", lambda p, h: rewrite_header(p, version=2), "unknown format version 2", -6),
    ("dtype", lambda p, h: rewrite_header(p, dtype=3), "inconsistent header: unknown dtype code or itemsize", -8),
    ("itemsize", lambda p, h: rewrite_header(p, itemsize=8), "inconsistent header: unknown dtype code", -8),
    ("rows-zero", lambda p, h: rewrite_header(p, rows=0, data_nbytes=0), "rows and width must be >= 1", -8),
    ("width", lambda p, h: rewrite_header(p, width=h["width"] + 1), "data_nbytes is not rows * width", -8),
    ("size-wraps", lambda p, h: rewrite_header(p, rows=1 << 61, width=16, data_nbytes=((1 << 61) * 64) % (1 << 64)),
     "data_nbytes is not rows * width", -8),
    ("start-overflows", lambda p, h: rewrite_header(p, start=_INT64_MAX - h["rows"] + 1),
     "inconsistent header: start + rows overflows int64", -8),
    ("data-offset", lambda p, h: rewrite_header(p, data_offset=h["data_offset"] + 64),
     "data_offset does not follow spec_len", -8),
    ("spec-len-zero", lambda p, h: rewrite_header(p, spec_len=0, data_offset=256), "data_offset does not follow", -8),
    ("generation-zero", lambda p, h: rewrite_header(p, generation=0), "generation outside 1..2^63-1", -8),
    ("generation-huge", lambda p, h: rewrite_header(p, generation=1 << 63), "generation outside 1..2^63-1", -8),
    ("checksum-unknown", lambda p, h: rewrite_header(p, checksum=7), "unknown checksum algorithm", -8),
    ("spec-hash-case", lambda p, h: rewrite_header(p, spec_hash=h["spec_hash"].upper().encode()),
     "spec_hash is not 16 lowercase hex digits", -8),
    ("name-slash", lambda p, h: rewrite_header(p, name=b"a/b"), "name is not a valid NUL-padded table name", -8),
    ("name-garbage", lambda p, h: rewrite_header(p, name=b"t\0x"), "name is not a valid NUL-padded", -8),
    ("reserved", lambda p, h: (poke(p, 200, b"\x01"), fix_header_crc(p)), "reserved bytes are not zero", -8),
    ("building", lambda p, h: poke(p, 12, struct.pack("<I", 1)), "not READY (state BUILDING)", -7),
    ("empty", lambda p, h: poke(p, 12, struct.pack("<I", 0)), "not READY (state EMPTY)", -7),
    ("state-unknown", lambda p, h: poke(p, 12, struct.pack("<I", 9)), "not READY (state 9)", -7),
    ("truncated", lambda p, h: os.truncate(p, os.path.getsize(p) - 1), "truncated", -4),
    ("trailing", lambda p, h: _append(p, b"\0"), "trailing bytes", -8),
    ("header-crc", lambda p, h: poke(p, 48, struct.pack("<q", h["start"] + 1)), "header checksum mismatch", -8),
    ("padding", lambda p, h: poke(p, 256 + h["spec_len"], b"\x01"), "non-zero padding after the spec JSON", -8),
    ("spec-bytes", lambda p, h: (poke(p, 256 + h["spec_len"] - 1, b" "), fix_header_crc(p)),
     "spec JSON does not match its hash", -8),
    ("data", lambda p, h: poke(p, os.path.getsize(p) - 1, b"\x5a"), "data checksum mismatch", -9),
]


def header_of(path: Path) -> dict:
    return {field: header_field(path, field) for field in HEADER_FIELDS} | {
        "spec_hash": header_field(path, "spec_hash").decode()}


def publish_same_name(root: str, name: str, count: int, dim: int) -> None:
    """Publish `count` generations of `name` as fast as possible (one of two racing writers);
    prints the generations this process flipped, in order. Any error escapes (exit 1)."""
    store = TableStore(root)
    table = table_from({"kind": "sinusoidal", "dim": dim}, 0, 16)
    generations = [store.publish(name, table).generation for _ in range(count)]
    print(json.dumps({"generations": generations}), flush=True)


def hold_registry_lock(root: str, seconds: float) -> None:
    """What any reader can do: open the registry read-only and hold flock(LOCK_EX) on it."""
    import fcntl

    fd = os.open(os.path.join(root, "posenc-registry"), os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    print(json.dumps({"locked": os.getpid()}), flush=True)
    time.sleep(seconds)


def attach_as_nobody(root: str, name: str) -> None:
    """Drop to uid/gid 65534 (nobody) and attach `name`: prints the outcome as JSON. Attaches
    once as root first, so numba has compiled everything (nobody cannot read the toolchain)."""
    attach(name, root=root).close()
    os.setgid(65534)
    os.setuid(65534)
    try:
        with attach(name, root=root) as tbl:
            print(json.dumps({"attached": tbl.generation}), flush=True)
    except Exception as exc:  # the test asserts which kind
        print(json.dumps({"error": type(exc).__name__, "field": getattr(exc, "field", None),
                          "message": str(exc)}), flush=True)


def verify_without_native(root: str, name: str) -> None:
    """Attach with verification in a process where libposenc is disabled (POSENC_NATIVE=0)."""
    from posenc.shm import checksum

    try:
        with attach(name, root=root) as tbl:
            outcome = {"attached": tbl.generation}
    except Exception as exc:  # the test asserts which
        outcome = {"error": str(exc)}
    print(json.dumps({**outcome, "crc32c": checksum.implementation()}), flush=True)


def publish_as_nobody(root: str, name: str, mode: int) -> None:
    """Publish `name` with `mode` as uid/gid 65534 (after a warm-up publish as root in a
    private directory, so numba has compiled everything): prints the outcome as JSON."""
    warm = tempfile.mkdtemp(dir=root)
    TableStore(warm).publish("warm", table_from({"kind": "sinusoidal", "dim": 8}, 0, 4))
    os.setgid(65534)
    os.setuid(65534)
    try:
        info = TableStore(root, mode=mode).publish(name, table_from({"kind": "sinusoidal", "dim": 8}, 0, 4))
        print(json.dumps({"published": info.generation}), flush=True)
    except Exception as exc:  # the test asserts which kind
        print(json.dumps({"error": type(exc).__name__, "field": getattr(exc, "field", None),
                          "message": str(exc)}), flush=True)
