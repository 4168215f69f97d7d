"""Helpers for the shared-memory tests: fixtures (`shm_root`, `shm_store`; test modules load
them with `pytest_plugins = ["shm_support"]`), the float64 oracle of a published table,
segment corruption, and the worker processes of the safety tests (run as
`python -c "import shm_support; shm_support.<worker>(...)"` with tests/ on the path).

PYTEST_DONT_REWRITE: test modules import it before pytest loads it as a plugin; its asserts
run mostly in worker processes, where rewriting does not apply anyway."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_matches_oracle, ulp_tolerance
from posenc import reference
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


@pytest.fixture
def shm_store(shm_root):
    """A TableStore on `shm_root`, closed afterwards."""
    store = TableStore(shm_root)
    yield store
    store.close()


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


def python_worker(call: str, **popen) -> subprocess.Popen:
    """Start `python -c "import shm_support; shm_support.<call>"` in a fresh interpreter."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
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
