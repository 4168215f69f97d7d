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


def test_planned_rows_are_sincos_rows_bits_in_python():
    """PlannedRows (a computed table's rows in Python) against SincosRows, call after call on one plan:
    runs, repeats of one coarse part, random ids, fractional positions, every output dtype."""
    import numpy as np

    from posenc.api._tables import PlannedRows, SincosRows, constant_amplitude
    from posenc.dtypes import OUTPUT_DTYPES

    spec = posenc.SinusoidalSpec(130)
    rng = np.random.default_rng(7)
    for dtype in OUTPUT_DTYPES.values():
        args = (spec.freqs, constant_amplitude(spec.n_sin, 0.75), spec.column_plan(), dtype)
        planned, plain = PlannedRows(*args), SincosRows(*args)
        if posenc.native.BINDING is not None:
            assert planned.native_plan is not None
        for _ in range(200):
            n = int(rng.integers(1, 12))
            kind = rng.integers(0, 3)
            base = float(rng.integers(-2**53, 2**53)) if kind == 0 else 1.7e12 + float(rng.integers(0, 10**11))
            positions = base + (np.arange(n, dtype=np.float64) if kind != 2 else rng.uniform(0, 1e4, n))
            assert planned(positions).tobytes() == plain(positions).tobytes()
            assert planned.one_row(float(positions[0])).tobytes() == plain(positions[:1])[0].tobytes()


def test_the_binding_refuses_what_does_not_fit_a_plan():
    import numpy as np

    binding = posenc.native.BINDING
    if binding is None:
        pytest.skip("no native binding")
    freqs = np.array([1.0, 0.5])
    plan = binding.sincos_plan(freqs, np.ones(2))
    out = np.empty(8)
    binding.sincos_plan_rows(plan, np.array([3.0, 4.0]), out, 4, 0, 2, False, 2)
    assert out.tolist() == [np.sin(3.0), np.sin(1.5), np.cos(3.0), np.cos(1.5),
                            np.sin(4.0), np.sin(2.0), np.cos(4.0), np.cos(2.0)]
    with pytest.raises(ValueError, match="flat: too small"):
        binding.sincos_plan_rows(plan, np.array([3.0, 4.0, 5.0]), out, 4, 0, 2, False, 2)
    with pytest.raises(ValueError, match="n_cos"):
        binding.sincos_plan_rows(plan, np.array([3.0]), out, 4, 0, 2, False, 3)
    with pytest.raises((TypeError, ValueError)):
        binding.sincos_plan_rows(object(), np.array([3.0]), out, 4, 0, 2, False, 2)
    with pytest.raises(ValueError, match="amp"):
        binding.sincos_plan(freqs, np.ones(3))
    with pytest.raises(ValueError, match="amp"):
        binding.sincos_plan(np.empty(0), np.empty(0))
