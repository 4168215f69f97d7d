"""The CPU matrix: the shipped native code on every x86-64 level and on aarch64, not only on
the CPU this suite happens to run on.

qemu-user runs a program on an emulated CPU model and raises SIGILL on any instruction the
model lacks, so a library that executes AVX before dispatch (or a kernel picked for a CPU
that cannot run it) dies here whatever machine runs the suite. Per CPU:

- the golden vectors (tests/native/kernel_vectors.py: sin/cos tables in every layout, RoPE
  rotation, ALiBi, JSON text, CRC-32C) through the shipped libposenc on every path the CPU
  runs, bit-identical to the numba kernels (tests/c/kernel_vectors.c);
- posenc-server answering PING, ENCODE_TABLE and ENCODE_SPEC with the library's bits;
- on the levels numpy supports (v2 and up), `import posenc` and `posenc info` naming the path,
  and public API calls through the CPython binding giving the numba kernels' bytes;
- POSENC_ISA naming a path the CPU lacks: refused with the clear error, by the library and the CLI;
- the frequency-dependent bytes (FREQUENCY_DIGEST: Llama-3's base 5e5 with its scaling, bases 5e6 and
  1e6, YaRN, LongRoPE, NTK, dynamic, sinusoidal and t2t frequencies, float64 and float32 rows, ALiBi's
  float32 slopes, the xPos decay, T5 buckets) equal to the host's, on the CPUs with and without FMA
  (glibc runs another pow and exp on each: 1 ulp apart at pow(500000, 0.484375), Llama-3's inv_freq[31])
  and under GLIBC_TUNABLES hwcaps masks, which send glibc's own dispatch down those paths on the host.

aarch64 (Graviton, Ampere, Linux VMs on Apple silicon): the library and the server built with
Debian's cross compiler and run under qemu-aarch64 (vectors and a server smoke test); the
CPython binding compiled for it.
QEMU's TCG has no AVX-512, so the AVX-512 path runs on the host only (where it has it; its
SIMDe-emulated build is checked everywhere by tests/native). `make test` installs qemu-user
and the cross compiler (the Makefile's platform-tools target).
"""

from __future__ import annotations

import functools
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import posenc
import pytest
from binary_support import table_store
from posenc.api import rope_table
from posenc.client import Client
from posenc.client.process import ServerProcess, server_argv
from posenc.tables import TableSpec

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "service" / "posenc" / "native" / "libposenc.so"
HOST = platform.machine()
CROSS_CC = "aarch64-linux-gnu-gcc"
AARCH64_SYSROOT = "/usr/aarch64-linux-gnu"


def host_path() -> str:
    """The path dispatch should pick on this machine, read from /proc/cpuinfo (not from posenc)."""
    flags = set(re.search(r"^flags\s*:(.*)$", Path("/proc/cpuinfo").read_text(), re.M).group(1).split())
    if {"avx512f", "avx2", "fma"} <= flags:
        return "avx512"
    return "avx2" if {"avx2", "fma"} <= flags else "scalar"


#: (id, how to run a program on that CPU, x86-64 level, the path dispatch must pick, runs numpy).
#: qemu64 is x86-64-v1 (SSE2): numpy 2.4's own baseline is v2, so only the C code runs there.
X86_CPUS = [
    ("qemu64", ["qemu-x86_64", "-cpu", "qemu64"], "x86-64-v1", "scalar", False),
    ("Nehalem", ["qemu-x86_64", "-cpu", "Nehalem"], "x86-64-v2", "scalar", True),
    ("Westmere", ["qemu-x86_64", "-cpu", "Westmere"], "x86-64-v2", "scalar", True),  # AES, PCLMUL; no FMA
    ("Haswell", ["qemu-x86_64", "-cpu", "Haswell"], "x86-64-v3", "avx2", True),
]
HOST_CPU = ("host", [], "this machine", host_path() if HOST == "x86_64" else "scalar", True)
CPUS = (X86_CPUS if HOST == "x86_64" else []) + [HOST_CPU]
PATHS_BELOW = {"scalar": ["scalar"], "avx2": ["scalar", "avx2"], "avx512": ["scalar", "avx2", "avx512"]}


def cpu_id(cpu) -> str:
    return cpu[0]


def need(tool: str) -> None:
    if shutil.which(tool) is None:
        pytest.fail(f"{tool} is missing: `make test` installs it (make platform-tools)")


def run_on(cpu, argv: list[str], env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    if cpu[1]:
        need(cpu[1][0])
    result = subprocess.run(cpu[1] + argv, capture_output=True, text=True, timeout=timeout,
                            env={**os.environ, **(env or {})})
    result.stderr = "\n".join(line for line in result.stderr.splitlines() if "TCG doesn't support" not in line)
    return result


@pytest.fixture(scope="session")
def vectors(tmp_path_factory) -> Path:
    sys.path.insert(0, str(ROOT / "tests" / "native"))
    import kernel_vectors

    path = tmp_path_factory.mktemp("cpu-matrix") / "vectors.bin"
    assert kernel_vectors.write(path) > 200
    return path


@functools.cache
def build_vectors_program(out_dir: Path, cc: str = "") -> Path:
    compiler = (cc or os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()
    target = out_dir / f"kernel_vectors-{Path(compiler[0]).name}"
    subprocess.run([*compiler, "-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", f"-I{ROOT / 'native' / 'include'}",
                    str(ROOT / "tests" / "c" / "kernel_vectors.c"), "-o", str(target), "-ldl"], check=True)
    return target


@pytest.fixture(scope="session")
def vectors_program(tmp_path_factory) -> Path:
    return build_vectors_program(tmp_path_factory.mktemp("cpu-matrix-bin"))


def check_vector_report(result: subprocess.CompletedProcess, expected_path: str) -> None:
    report = result.stdout
    assert result.returncode == 0, f"exit {result.returncode}\n{report}\n{result.stderr}"
    assert f"dispatch: {expected_path} " in report, report
    assert f"active {expected_path}:" in report, report
    runnable = re.findall(r"^path (\w+): (\d+) vectors bit-identical$", report, re.M)
    assert [name for name, _ in runnable] == PATHS_BELOW[expected_path], report
    assert all(int(count) > 200 for _, count in runnable), report
    assert re.search(r"^json scalar: [1-9]", report, re.M), report
    if expected_path != "scalar":  # every AVX2 CPU runs the AVX2 JSON writer too
        assert re.search(r"^json avx2: [1-9]", report, re.M), report
    assert re.search(r"^crc32c table: [1-9]", report, re.M), report
    assert re.search(r"^\d+ vectors, 0 mismatches$", report, re.M), report


# --- x86-64 levels (and the host) ---------------------------------------------------------------

@pytest.mark.parametrize("cpu", CPUS, ids=cpu_id)
def test_golden_vectors_bit_identical_on_every_path_the_cpu_runs(cpu, vectors, vectors_program):
    result = run_on(cpu, [str(vectors_program), str(LIBRARY), str(vectors)], env={"POSENC_ISA": "auto"})
    check_vector_report(result, cpu[3])


@pytest.mark.parametrize("cpu", [c for c in CPUS if c[3] != "avx512"], ids=cpu_id)
def test_forcing_a_path_the_cpu_lacks_is_refused_by_the_library(cpu, vectors, vectors_program):
    missing = "avx512" if cpu[3] == "avx2" else "avx2"
    result = run_on(cpu, [str(vectors_program), str(LIBRARY), str(vectors)], env={"POSENC_ISA": missing})
    assert result.returncode == 3, result.stdout + result.stderr
    assert f"dispatch: refused: POSENC_ISA={missing} asks for a path this CPU cannot run ({missing} needs" \
        in result.stdout


@pytest.mark.parametrize("cpu", [c for c in CPUS if c[4]], ids=cpu_id)
def test_import_and_info_name_the_path(cpu):
    result = run_on(cpu, [sys.executable, "-m", "posenc.cli", "info"], env={"POSENC_ISA": "auto"})
    assert result.returncode == 0, result.stderr
    line = re.search(r"native kernels: (\w+) \(runnable here: ([\w, ]+);", result.stdout)
    assert line, result.stdout
    assert line.group(1) == cpu[3]
    assert line.group(2).split(", ") == PATHS_BELOW[cpu[3]]


#: Public API calls whose every byte is defined (sin/cos and the RoPE rotation bit-identical on every
#: path and numba, batch invariance; ALiBi, T5 buckets and the 16-bit casts exact), hashed: they run
#: through the CPython binding (native/python/_posenc.c) on the emulated CPU.
API_DIGEST = """
import hashlib, numpy as np, posenc
from posenc.kernels import active
spec = posenc.RopeSpec(64, scaling={"rope_type": "yarn", "factor": 4.0},
                       original_max_position_embeddings=4096)
x = np.linspace(-3, 3, 2 * 50 * 64).reshape(2, 50, 64).astype(np.float32)
parts = [posenc.sinusoidal(np.arange(300), 130), posenc.sinusoidal([0.5, 1e9, -7.0], 33, dtype="bfloat16"),
         posenc.sinusoidal(np.arange(0, 5000, 7), 64, dtype="float16"),
         posenc.rope_apply(x, np.arange(50), spec),
         posenc.rope_cos_sin(np.arange(4100), spec, dtype="float64")[1], posenc.alibi_bias(5, 30, 40),
         posenc.t5_relative_position_bucket(np.arange(-3000, 3000))]
print(active.NAME, hashlib.sha256(b"".join(p.tobytes() for p in parts)).hexdigest())
"""


@functools.cache
def numba_api_digest() -> str:
    result = subprocess.run([sys.executable, "-c", API_DIGEST], capture_output=True, text=True, check=True,
                            env={**os.environ, "POSENC_NATIVE": "0"})
    path, digest = result.stdout.split()
    assert path == "numba"
    return digest


@pytest.mark.parametrize("cpu", [c for c in CPUS if c[4]], ids=cpu_id)
def test_api_through_the_binding_gives_the_numba_bytes(cpu):
    result = run_on(cpu, [sys.executable, "-c", API_DIGEST], timeout=600)
    assert result.returncode == 0, result.stderr
    path, digest = result.stdout.split()
    assert path == cpu[3]
    assert digest == numba_api_digest()


@pytest.mark.parametrize("cpu", [c for c in CPUS if c[4] and c[3] != "avx512"], ids=cpu_id)
def test_forcing_a_path_the_cpu_lacks_is_a_clear_cli_error(cpu):
    missing = "avx512" if cpu[3] == "avx2" else "avx2"
    result = run_on(cpu, [sys.executable, "-m", "posenc.cli", "info"], env={"POSENC_ISA": missing})
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith(f"posenc: error: POSENC_ISA: {missing} asks for a path this CPU cannot run"), \
        result.stderr
    assert "Traceback" not in result.stderr


#: Bytes that hang on pow, exp and log (posenc.crmath, posenc_crmath.h), each part hashed: the frequencies
#: and attention factors of the specs models use, their rows in float64 and float32 at positions up to
#: 10^6, ALiBi's float32 slopes, the xPos decay and T5's float32 logs. glibc's pow and exp differ between
#: CPUs with and without FMA, so these bytes did too before posenc.crmath.
FREQUENCY_DIGEST = '''
import hashlib, json, numpy as np, posenc
from posenc.kernels import active
LONG = [1.0 + 0.07 * i for i in range(48)]
SHORT = [1.0 + 0.013 * i for i in range(48)]
SPECS = {
    "llama3": posenc.RopeSpec(128, base=500000.0, scaling={"rope_type": "llama3", "factor": 8.0,
              "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}),
    "base5e5": posenc.RopeSpec(128, base=500000.0),
    "base5e6": posenc.RopeSpec(128, base=5e6),
    "base1e6": posenc.RopeSpec(128, base=1e6, partial_rotary_factor=0.5),
    "yarn": posenc.RopeSpec(128, base=1e6, scaling={"rope_type": "yarn", "factor": 4.0},
                            original_max_position_embeddings=32768),
    "yarn_deepseek": posenc.RopeSpec(64, scaling={"rope_type": "yarn", "factor": 40.0, "beta_fast": 32,
                                     "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 0.707},
                                     original_max_position_embeddings=4096),
    "longrope": posenc.RopeSpec(96, scaling={"rope_type": "longrope", "long_factor": LONG, "short_factor": SHORT},
                                max_position_embeddings=131072, original_max_position_embeddings=4096),
    "ntk": posenc.RopeSpec(128, base=500000.0, scaling={"rope_type": "ntk", "factor": 2.7}),
    "dynamic": posenc.RopeSpec(128, scaling={"rope_type": "dynamic", "factor": 3.3}, max_position_embeddings=4096),
}
positions = np.array([0, 1, 17, 4095, 8191, 65535, 131071, 1000000, 2 ** 40 + 7])
parts = {}
for name, spec in SPECS.items():
    seq_len = 131072 if spec.length_dependent else None
    inv, attention = posenc.rope_inv_freq(spec, seq_len=seq_len)
    parts[name + ".inv_freq"] = inv.tobytes() + np.float64(attention).tobytes()
    for dtype in ("float64", "float32"):
        cos, sin = posenc.rope_cos_sin(positions, spec, seq_len=seq_len, dtype=dtype)
        parts[name + "." + dtype] = cos.tobytes() + sin.tobytes()
parts["longrope.short"] = posenc.rope_inv_freq(SPECS["longrope"], seq_len=4096)[0].tobytes()
for layout in ("interleaved", "t2t"):
    spec = posenc.SinusoidalSpec(8192, layout=layout)
    parts["sinusoidal." + layout] = spec.freqs.tobytes() + posenc.sinusoidal(positions, 8192, layout=layout).tobytes()
parts["sinusoidal.float64"] = posenc.sinusoidal(positions, 512, base=5e5, dtype="float64").tobytes()
parts["alibi"] = b"".join(posenc.alibi_slopes(48, variant=v).tobytes() for v in ("paper", "bloom", "mpt", "falcon"))
parts["xpos"] = posenc.xpos_scale(np.arange(-3000.0, 3000.0, 7.0), posenc.RopeSpec(64, xpos_scale_base=512.0)).tobytes()
parts["t5"] = b"".join(posenc.t5_relative_position_bucket(np.arange(-70000, 70000, 3), num_buckets=n, max_distance=m,
                       bidirectional=b).tobytes() for n, m, b in ((32, 128, True), (64, 1000, False), (320, 161, True)))
print(json.dumps({"path": active.NAME, "parts": {k: hashlib.sha256(v).hexdigest()[:16] for k, v in parts.items()}}))
'''
#: glibc's own dispatch, steered on the host: its pow and exp differ without FMA (either mask alone
#: takes them there), and AVX-512 masked changes its string functions.
HWCAPS_MASKS = ["-AVX2,-FMA", "-FMA", "-AVX2", "-AVX512F,-AVX512VL", "-AVX"]


def frequency_digest(cpu, env: dict | None = None) -> dict:
    result = run_on(cpu, [sys.executable, "-c", FREQUENCY_DIGEST], env=env, timeout=600)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@functools.cache
def host_frequency_parts() -> dict:
    return frequency_digest(HOST_CPU)["parts"]


def differing(parts: dict) -> list[str]:
    return sorted(name for name, digest in parts.items() if host_frequency_parts().get(name) != digest)


@pytest.mark.parametrize("cpu", [c for c in X86_CPUS if c[4]], ids=cpu_id)
def test_frequency_bytes_are_the_hosts_on_cpus_with_and_without_fma(cpu):
    digest = frequency_digest(cpu)
    assert digest["path"] == cpu[3]
    assert not differing(digest["parts"]), f"{cpu[0]} differs from the host in {differing(digest['parts'])}"


@pytest.mark.parametrize("mask", HWCAPS_MASKS)
def test_frequency_bytes_do_not_follow_glibcs_dispatch(mask):
    if HOST != "x86_64":
        pytest.skip("glibc.cpu.hwcaps masks x86 features")
    digest = frequency_digest(HOST_CPU, env={"GLIBC_TUNABLES": f"glibc.cpu.hwcaps={mask}"})
    assert not differing(digest["parts"]), f"hwcaps {mask} differs from the host in {differing(digest['parts'])}"


#: posenc_crmath.h's inputs for the C matrix: frequency exponents, random arguments and hard cases
#: (tests/test_crmath.py has more, against mpmath). One "OP X Y" line each (tests/c/crmath_check.c).
def crmath_lines() -> list[str]:
    rng = np.random.default_rng(17)
    lines = [f"pow {b.hex()} {(i / d).hex()}" for b in (1e4, 5e5, 5e6, 1e6) for d in (128, 8192) for i in range(0, d, 7)]
    for x, y, z in zip(np.exp(rng.uniform(-40, 40, 400)), rng.uniform(-25, 25, 400), rng.uniform(-745, 709, 400)):
        lines += [f"pow {float(x).hex()} {float(y).hex()}", f"exp {float(z).hex()} 0", f"log {float(x).hex()} 0",
                  f"powf {float(np.float32(x % 1e4)).hex()} {float(np.float32(y / 4)).hex()}",
                  f"logf {float(np.float32(x)).hex()} 0"]
    hard = ["pow 0x1.e848p+18 0x1.fp-2",  # the pow(500000, 0.484375)
            "pow 0x1.ffffffffffffcp-1 0x1.fffffffffffffp-2", "pow 0x1.ffffffffffff8p-1 -0x1.ffffffffffffbp-3",
            "pow 0x1.2p+3 0x1.1p+4", "pow 0x1p+1 -0x1.0c9p+10", "exp 0x1.00d48a707b93ep-1 0",
            "log 0x1.a6ae5142326b5p+0 0"]
    # "!": the accurate path alone
    return lines + hard + [line.replace(" ", "! ", 1) for line in hard + lines[::97]]


@functools.cache
def crmath_program(out_dir: Path, cc: str, *flags: str) -> Path:
    target = out_dir / f"crmath_check-{Path(cc).name}{''.join(flags)}"
    subprocess.run([cc, "-std=c11", "-O2", "-Wall", "-Werror", *flags, f"-I{ROOT / 'native' / 'include'}",
                    str(ROOT / "tests" / "c" / "crmath_check.c"), "-lm", "-o", str(target)], check=True)
    return target


def crmath_outputs(cpu, program: Path) -> list[str]:
    result = subprocess.run(cpu[1] + [str(program)], input="\n".join(crmath_lines()) + "\n", capture_output=True,
                            text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


@pytest.fixture(scope="session")
def crmath_host(tmp_path_factory) -> tuple[Path, list[str]]:
    """The baseline build of crmath_check and its answers on this machine, which must be posenc.crmath's."""
    from posenc import crmath
    from posenc.crmath import _exact

    out = tmp_path_factory.mktemp("crmath")
    program = crmath_program(out, "cc")
    answers = crmath_outputs(HOST_CPU, program)
    ops = {"pow": crmath.pow_value, "exp": crmath.exp_value, "log": crmath.log_value, "powf": crmath.powf,
           "logf": crmath.logf, "pow!": _exact.pow_exact, "exp!": _exact.exp_exact, "log!": _exact.log_exact,
           "powf!": lambda x, y: _exact.pow_exact(x, y, 24), "logf!": lambda x: _exact.log_exact(x, 24)}
    for line, answer in zip(crmath_lines(), answers):
        op, x, y = line.split()
        args = (float.fromhex(x), float.fromhex(y)) if op.startswith("pow") else (float.fromhex(x),)
        assert float.fromhex(answer) == ops[op](*args), line
    return out, answers


@pytest.mark.parametrize("cpu", X86_CPUS, ids=cpu_id)
def test_crmath_c_gives_the_hosts_numbers_on_every_x86_level(cpu, crmath_host):
    """posenc_crmath.h in a baseline build (Dekker products) on each CPU; on the FMA CPUs also built
    with -mfma (fused products, FP_FAST_FMA): the same answers, posenc.crmath's."""
    if cpu[1]:
        need(cpu[1][0])
    out, answers = crmath_host
    assert crmath_outputs(cpu, crmath_program(out, "cc")) == answers
    if cpu[3] != "scalar":
        assert crmath_outputs(cpu, crmath_program(out, "cc", "-mfma")) == answers


def test_crmath_c_gives_the_hosts_numbers_on_aarch64(crmath_host, tmp_path):
    cc = "cc" if HOST == "aarch64" else CROSS_CC
    need(cc)
    if AARCH64_RUN:
        need(AARCH64_RUN[0])
    assert crmath_outputs(("aarch64", AARCH64_RUN), crmath_program(tmp_path, cc)) == crmath_host[1]


def test_frequency_bytes_are_the_same_on_numba():
    digest = frequency_digest(HOST_CPU, env={"POSENC_NATIVE": "0"})
    assert digest["path"] == "numba"
    assert not differing(digest["parts"]), f"numba differs from the native path in {differing(digest['parts'])}"


TABLES = {"sin128": TableSpec(posenc.SinusoidalSpec(128), 0, 4096),
          "rope64": TableSpec(posenc.RopeSpec(64, base=500000.0), 0, 4096, dtype="float64")}
POSITIONS = np.array([0, 1, 17, 1023, 1024, 4095, 2048, 3], dtype=np.int64)
SPEC_POSITIONS = np.array([0.0, 1.0, -5.0, 0.5, 70000.0, 2.0**31 - 1])


def server_smoke(prefix: list[str], server: str | None, expected_path: str) -> None:
    """PING, ENCODE_TABLE and ENCODE_SPEC through a server started with `prefix`, against the library."""
    with table_store(TABLES) as (_, root):
        argv = server_argv(port=0, shm_dir=str(root), threads=1)
        if server:
            argv[0] = server
        with ServerProcess(prefix + argv, ready_timeout=60) as srv, Client(srv.address, timeout=60) as client:
            assert f" isa={expected_path} " in srv.ready_line
            assert client.ping(b"cpu") == b"cpu"
            assert client.stats()["isa"] == expected_path
            got = client.encode("sin128", POSITIONS)
            assert got.tobytes() == posenc.sinusoidal(POSITIONS, 128, dtype="float32").tobytes()
            got = client.encode("rope64", POSITIONS, dtype="float64")
            assert got.tobytes() == rope_table(POSITIONS, posenc.RopeSpec(64, base=500000.0), dtype="float64").tobytes()
            for dtype in ("float32", "bfloat16"):
                got = client.encode_spec(posenc.SinusoidalSpec(96), SPEC_POSITIONS, dtype=dtype)
                want = posenc.sinusoidal(SPEC_POSITIONS, 96, dtype=dtype)
                assert got.tobytes() == want.tobytes(), dtype


@pytest.mark.parametrize("cpu", CPUS, ids=cpu_id)
def test_server_answers_with_the_library_bits(cpu):
    from binary_support import build

    build()
    if cpu[1]:
        need(cpu[1][0])
    server_smoke(cpu[1], None, cpu[3])


# --- aarch64 ------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def aarch64_build(tmp_path_factory) -> Path:
    """libposenc, posenc-server and the vectors program for aarch64 (natively on an aarch64 host)."""
    out = tmp_path_factory.mktemp("aarch64")
    cc = "cc" if HOST == "aarch64" else CROSS_CC
    need(cc)
    sources = sorted(str(p) for p in (ROOT / "native" / "src").glob("*.c"))
    subprocess.run([cc, "-std=c11", "-O3", "-fPIC", "-shared", "-fvisibility=hidden", "-ffp-contract=off",
                    f"-I{ROOT / 'native' / 'include'}", f"-I{ROOT / 'native' / 'src'}", *sources, "-lm",
                    "-o", str(out / "libposenc.so")], check=True)
    subprocess.run(["make", "-s", "-C", str(ROOT / "native" / "server"), f"CC={cc}", f"BUILD={out}",
                    f"OBJ={out / 'obj'}"], check=True, capture_output=True)
    build_vectors_program(out, cc)
    return out


AARCH64_RUN = [] if HOST == "aarch64" else ["qemu-aarch64", "-L", AARCH64_SYSROOT]


def test_aarch64_golden_vectors_bit_identical(aarch64_build, vectors):
    cpu = ("aarch64", AARCH64_RUN, "armv8-a", "scalar", False)
    program = next(aarch64_build.glob("kernel_vectors-*"))
    result = run_on(cpu, [str(program), str(aarch64_build / "libposenc.so"), str(vectors)])
    check_vector_report(result, "scalar")


def test_aarch64_binding_compiles(tmp_path):
    """The CPython binding has no x86-only code (nothing there runs it without an aarch64 Python):
    compiled with the cross compiler against this Python's headers, every warning an error."""
    if HOST == "aarch64":
        pytest.skip("built and run natively by `make install` on this host")
    need(CROSS_CC)
    subprocess.run([CROSS_CC, "-std=c11", "-O2", "-fPIC", "-Wall", "-Wextra", "-Werror",
                    "-Wno-unused-function", "-Wno-unused-parameter", f"-I{sysconfig.get_paths()['include']}",
                    f"-I{ROOT / 'native' / 'include'}", "-c", str(ROOT / "native" / "python" / "_posenc.c"),
                    "-o", str(tmp_path / "_posenc.o")], check=True)


def test_aarch64_server_answers_with_the_library_bits(aarch64_build):
    if AARCH64_RUN:
        need(AARCH64_RUN[0])
    server_smoke(AARCH64_RUN, str(aarch64_build / "posenc-server"), "scalar")
