"""posenc_shm.h's CRC-32C kernels against a bitwise CRC-32C (tests/c/crc32c_kernels.c): on this
CPU, on qemu's x86-64 levels (the kernels each level runs), and the AVX2 + VPCLMULQDQ kernel
with its carry-less multiply emulated where no CPU here has the instruction."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from conftest import compile_c_test

from posenc import native

#: (qemu CPU model, the kernels it must run): qemu64 lacks SSE4.2; qemu 7.2 emulates no VPCLMULQDQ.
QEMU_CPUS = [("qemu64", ["table"]), ("Nehalem", ["table", "sse4.2"]), ("Haswell", ["table", "sse4.2"])]


def kernels_run(stdout: str) -> list[str]:
    assert re.search(r"^0 mismatches$", stdout, re.M), stdout
    return re.findall(r"^kernel (\S+): \d+ checks$", stdout, re.M)


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    return compile_c_test(tmp_path_factory, "crc32c_kernels.c", "-Wextra")


def test_every_kernel_this_cpu_runs_matches_the_bitwise_crc(program):
    result = subprocess.run([str(program)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout
    run = kernels_run(result.stdout)
    assert run[0] == "table" and len(run) >= 1
    assert re.search(r"^best: (\S+)$", result.stdout, re.M).group(1) == run[-1]  # the fastest it runs


@pytest.mark.parametrize(("cpu", "expected"), QEMU_CPUS, ids=[cpu for cpu, _ in QEMU_CPUS])
def test_each_x86_level_runs_the_kernels_it_has(program, cpu, expected):
    if shutil.which("qemu-x86_64") is None:
        pytest.fail("qemu-x86_64 is missing: `make test` installs it (make platform-tools)")
    result = subprocess.run(["qemu-x86_64", "-cpu", cpu, str(program)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert kernels_run(result.stdout) == expected


def test_the_avx2_vpclmulqdq_kernel_with_an_emulated_carry_less_multiply(tmp_path_factory):
    # The 256-bit kernel's own loads, xors, broadcast and seed run natively; only VPCLMULQDQ's
    # two 128-bit products per instruction come from SIMDe (two PCLMULQDQs).
    features = native.cpu_features().split()
    if "avx2" not in features:
        pytest.skip("needs an AVX2 CPU to run the kernel's other instructions")
    simde_py = pytest.importorskip("simde_py", reason="simde-py (test extra) provides the SIMDe headers")
    program = compile_c_test(tmp_path_factory, "crc32c_kernels.c", "-Wextra", "-mavx2", "-mpclmul",
                             "-DPOSENC_TEST_EMULATE_VPCLMUL256", f"-I{simde_py.get_include()}")
    result = subprocess.run([str(program)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout
    assert "best: vpclmulqdq256" in result.stdout
    assert kernels_run(result.stdout)[-1] == "vpclmulqdq256"
