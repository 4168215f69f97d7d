"""posenc's kernels import for a user who may write neither the package's __pycache__ nor a
home directory, with no NUMBA_CACHE_DIR (issue 26: a shm reader running as another user got
"cannot cache function 'alibi_bias_rows': no locator available")."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
from posenc.shm import TableStore
from shm_support import table_from

pytest_plugins = ["shm_support"]

PACKAGE = Path(__file__).resolve().parents[1] / "service" / "posenc"

ATTACH = """
import json, os, sys
from posenc.shm import attach
with attach("t", root=sys.argv[1]) as tbl:
    print(json.dumps({"row": tbl.lookup([3]).tolist(), "cache": os.listdir(sys.argv[2])}))
"""


def _unwritable_install(root: Path) -> Path:
    """A copy of the package whose every __pycache__ is a plain file: numba cannot cache next to
    the source there, even as root (which file modes do not stop)."""
    copy = root / "site" / "posenc"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    for directory, _, _ in os.walk(copy):
        Path(directory, "__pycache__").write_bytes(b"")
    return copy.parent


def _run(site: Path, shm_root: Path, tmp: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "XDG_"))}
    env.update(PYTHONPATH=str(site), POSENC_NATIVE="0", HOME="/dev/null", TMPDIR=str(tmp), PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([sys.executable, "-c", ATTACH, str(shm_root), str(tmp)], env=env, capture_output=True,
                          text=True, timeout=600, check=False)


def test_a_reader_with_nowhere_to_cache_attaches_through_the_per_user_directory(shm_root, tmp_path):
    table = table_from({"kind": "alibi", "n_heads": 4}, 0, 10)
    with TableStore(shm_root) as store:
        store.publish("t", table)
        site, tmp = _unwritable_install(tmp_path), tmp_path / "tmp"
        tmp.mkdir()
        proc = _run(site, shm_root, tmp)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "no locator available" not in proc.stderr
        shared = tmp / f"posenc-numba-{os.getuid()}"
        assert json.loads(proc.stdout)["cache"] == [shared.name]
        assert (shared.stat().st_mode & 0o777) == 0o700 and any(shared.rglob("*.nbi"))  # cached for the next run
        np.testing.assert_array_equal(json.loads(proc.stdout)["row"], table.compute(np.array([3.0]), np.float32))


def test_a_per_user_directory_someone_else_owns_is_never_loaded_from(shm_root, tmp_path):
    """Cache files are pickles: a directory planted under the name by another user is not used."""
    table = table_from({"kind": "alibi", "n_heads": 4}, 0, 10)
    with TableStore(shm_root) as store:
        store.publish("t", table)
        site, tmp = _unwritable_install(tmp_path), tmp_path / "tmp"
        planted = tmp / f"posenc-numba-{os.getuid()}"
        planted.mkdir(parents=True)
        os.chmod(planted, 0o777)  # anyone may write it: not a safe place for pickles
        proc = _run(site, shm_root, tmp)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert not any(planted.iterdir())  # cached privately instead, and that removed at exit
        assert sorted(os.listdir(tmp)) == [planted.name]
