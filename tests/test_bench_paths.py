"""`posenc bench tables|shm` measure every native path this CPU runs in one command: one child process a
path (POSENC_ISA set; the library picks its path once, at load), their reports joined with a path column."""

import os
import subprocess
import sys

import pytest
from posenc import native
from posenc.bench.paths import join_reports, requested_paths, runnable_paths
from posenc.errors import PosencError

AVX2_REPORT = """| table | ms |
|---|---|
| sin | 1.00 |
| rope | 2.00 |

Median of 5, path: native avx2.
Machine: X.
"""
SCALAR_REPORT = AVX2_REPORT.replace("1.00", "3.00").replace("2.00", "4.00").replace("avx2", "scalar")


def test_tables_get_a_path_column_and_differing_notes_one_line_a_path():
    joined = join_reports({"avx2": AVX2_REPORT, "scalar": SCALAR_REPORT})
    assert joined == """| path | table | ms |
|---|---|---|
| avx2 | sin | 1.00 |
| avx2 | rope | 2.00 |
| scalar | sin | 3.00 |
| scalar | rope | 4.00 |

- avx2: Median of 5, path: native avx2.
- scalar: Median of 5, path: native scalar.

Machine: X.
"""


def test_reports_of_different_shapes_are_refused():
    with pytest.raises(PosencError, match="differ in shape"):
        join_reports({"avx2": AVX2_REPORT, "scalar": "| a |\n|---|\n| 1 |\n"})


def test_paths_are_the_runnable_ones_fastest_first_and_unknown_ones_are_refused():
    runnable = runnable_paths()
    assert sorted(runnable) == sorted(native.available_isas())
    assert runnable == sorted(runnable, key=native.ISAS.index, reverse=True)
    assert requested_paths("all") == runnable
    with pytest.raises(PosencError, match="not a path this CPU runs"):
        requested_paths("avx1024")


@pytest.mark.skipif(len(native.available_isas()) < 2, reason="needs the native library with two paths")
def test_bench_tables_reports_each_path_measured_on_that_path(tmp_path):
    out = tmp_path / "tables.md"
    done = subprocess.run([sys.executable, "-m", "posenc.cli", "bench", "tables", "--rows", "4096", "--repeats", "1",
                           "--out", str(out)], capture_output=True, text=True, timeout=600, check=False,
                          env={**os.environ, "POSENC_ISA": "scalar"})  # the parent's own path does not matter
    assert done.returncode == 0, done.stderr
    report = out.read_text()
    lines = report.splitlines()
    assert lines[0].startswith("| path | table | implementation |")
    assert lines[0].endswith("| vs fill | vs fresh-page fill | max abs error vs float64 | exact fallback |")
    assert "| path | table | `out` starts | ms (median) | GB/s | vs aligned | vs fill |" in report
    for path in runnable_paths():
        rows = [line for line in lines if line.startswith(f"| {path} | ")]
        assert len(rows) == 18, (path, report)  # 5 sinusoidal and 5 RoPE rows, 4 offsets of each into `out`
        assert f"- {path}: " in report and f"posenc kernel path: native {path} " in report
