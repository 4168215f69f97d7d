"""posenc_sincos_plan (posenc.h), what posenc-server computes a named computed table's rows with: the
same bits as sincos_rows on every kernel path this CPU runs, whatever its caches held from earlier
calls (tests/c/sincos_plan.c)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from conftest import compile_c_test

import posenc.native

LIBRARY = Path(posenc.native.__file__).with_name("libposenc.so")


def test_plans_give_sincos_rows_bits_on_every_path(tmp_path_factory):
    if not LIBRARY.exists():
        pytest.skip("libposenc is not built")
    exe = compile_c_test(tmp_path_factory, "sincos_plan.c", "-Wextra", f"-L{LIBRARY.parent}", "-lposenc", "-lm",
                         f"-Wl,-rpath,{LIBRARY.parent}")
    result = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout
    paths = re.findall(r"^path (\S+): (\d+) rows$", result.stdout, re.M)
    assert [name for name, _ in paths][0] == "scalar" and all(int(rows) > 1000 for _, rows in paths)
    assert posenc.native.STATUS in [name for name, _ in paths]  # the path this process runs is among them
