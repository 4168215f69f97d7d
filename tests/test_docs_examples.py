"""Every example in README.md and docs/**/*.md runs here, as written (tests/test_docs_site.py builds the site).

Each fenced block has a language, and the language says what is done with it:

* ``python``: executed, each block in a namespace of its own (a reader copies one block, so it must
  run alone: its imports included), in a working directory holding the files the examples name
  (``config.json``, ``q.npy``, ...; see ``workdir``);
* ``sh``: run by bash (``set -e``; ``curl`` fails on an HTTP error) when every command is ``posenc``,
  ``curl``, ``python3 -c`` or a variable assignment; ``console``: each ``$`` line is run and what it
  prints must be the block's output below it;
* ``c``: compiled as C11 and as C++17 (``-I native/include -lm``), both run;
* ``go``: a ``package main`` run with ``go run`` in a module of its own whose ``posenc.dev/posenc`` is
  ``clients/go`` (a ``replace``; ``GOPROXY=off``: nothing is fetched);
* ``java``: run as a single-file program (``java -cp CLASSES File.java``) against the Java client
  (``clients/java``, compiled by its ``build-harness``);
* ``toml``, ``json``, ``yaml``: parsed; ``text``: diagrams, formulas and output, not run.

Python, shell, C, Go and Java run against one live ``posenc serve`` started here (what ``make run`` serves, on free
ports): the documented ports 8000/8001 are rewritten to the test's, ``/dev/shm`` to a private directory,
which is also ``POSENC_SHM_DIR``. A block that cannot run here is preceded by
``<!-- example: skip — REASON -->``; an unmarked block that this file cannot run is a failure.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import yaml

from posenc.config import DEFAULT_TOML
from posenc.http.runtime.launch import ServerProcess, free_port

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "tests" / "fixtures" / "hf_configs"
PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))
LANGUAGES = {"python", "sh", "console", "c", "go", "java", "toml", "json", "yaml", "text"}
SKIP = re.compile(r"^<!-- example: skip (?:—|--|-) (?P<reason>\S.*\S) -->$")
FENCE = re.compile(r"^```(?P<lang>[\w+-]*)\s*$")
SHELL_COMMANDS = ("posenc ", "curl ", "python3 -c ", "B=")
API_KEY = "s3cret-docs"


@dataclass
class Block:
    page: Path
    line: int
    lang: str
    text: str
    skip: str | None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    found, lines = [], page.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = SKIP.match(before.strip())
        found.append(Block(page, i + 1, m["lang"], "\n".join(lines[i + 1:end]) + "\n",
                           marker["reason"] if marker else None))
        i = end + 1
    return found


def shell_commands(text: str) -> list[str]:
    """The command lines of a shell block: continuation lines and comments left out."""
    commands, continued = [], False
    for line in text.splitlines():
        stripped = line.strip()
        if not continued and stripped and not stripped.startswith("#"):
            commands.append(stripped)
        continued = stripped.endswith("\\")
    return commands


def runnable_shell(block: Block) -> bool:
    return all(re.sub(r"^(POSENC_\w+=\S+ )+", "", c).startswith(SHELL_COMMANDS) for c in shell_commands(block.text))


ALL = [b for page in PAGES for b in blocks(page)]


def test_every_block_is_runnable_or_says_why_not():
    problems = []
    for b in ALL:
        if b.lang not in LANGUAGES:
            problems.append(f"{b.where}: fence language {b.lang!r} (one of {sorted(LANGUAGES)})")
        elif b.skip and b.lang == "text":
            problems.append(f"{b.where}: a text block is never run; drop the skip marker")
        elif b.lang == "sh" and not b.skip and not runnable_shell(b):
            problems.append(f"{b.where}: runs something other than {SHELL_COMMANDS}: make it runnable or mark it "
                            "<!-- example: skip — REASON -->")
    assert not problems, "\n".join(problems)
    assert len([b for b in ALL if b.skip]) < len([b for b in ALL if not b.skip and b.lang != "text"])


# --- the live service and the files the examples name ------------------------------------------------


@pytest.fixture(scope="module")
def shm_dir():
    root = tempfile.mkdtemp(prefix="posenc-docs-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def live(shm_dir):
    """`make run`'s service (the embedded config) on free ports, one worker, table management on."""
    from binary_support import build
    build()
    binary_port = free_port()
    assert "binary_port = 8001" in DEFAULT_TOML
    config = DEFAULT_TOML.replace("binary_port = 8001", f"binary_port = {binary_port}")
    env = {"POSENC_SHM_DIR": shm_dir, "POSENC_WORKERS": "1", "POSENC_API_KEY": API_KEY}
    server = ServerProcess(config, env=env).start()
    server.binary_port = binary_port
    yield server
    assert server.stop() == 0, server.log()


def save_safetensors(path: Path, tensors: dict) -> None:
    from safetensors.numpy import save_file
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, str(path))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """The files the examples read, by the names they use."""
    import posenc
    from audit_recipes import config, hf_llama, without_attention_factor

    d = tmp_path_factory.mktemp("docs-examples")
    configs = {"config.json": "llama-3.1-8b", "llama/config.json": "llama-3.1-8b", "gemma3/config.json": "gemma-3-4b",
               "qwen.json": "qwen2-7b-yarn", "opt/config.json": "opt-125m", "t5-small/config.json": "t5-small",
               "m2m100/config.json": "m2m100-418m", "qwen2-vl/config.json": "qwen2-vl-7b-instruct"}
    for name, fixture in configs.items():
        (d / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(CONFIGS / f"{fixture}.json", d / name)
    rng = np.random.default_rng(26)
    np.save(d / "q.npy", rng.standard_normal((2, 16, 128)).astype(np.float16))
    np.arange(0.5, 8.5, dtype="<f8").tofile(d / "positions_f64.bin")
    wpe = rng.standard_normal((1024, 768)).astype(np.float32) * 0.02
    save_safetensors(d / "wpe.safetensors", {"wpe.weight": wpe})
    save_safetensors(d / "gpt2/model.safetensors", {"wpe.weight": wpe})
    save_safetensors(d / "opt/model.safetensors",
                     {"model.decoder.embed_positions.weight": rng.standard_normal((2050, 768)).astype(np.float32)})
    # The audit examples: transformers' own LlamaRotaryEmbedding cache, and Qwen2 YaRN without its attention factor.
    save_safetensors(d / "rope_cache.safetensors", hf_llama(config("llama-3.1-8b"), 32768))
    qwen = without_attention_factor(posenc.RopeSpec.from_hf_config(config("qwen2-7b-yarn")), 8192)
    np.save(d / "qwen_cache.npy", np.stack([qwen["cos"][:, :64], qwen["sin"][:, :64]]))  # [2, n, n_freq]
    return d


def rewrite(text: str, live, shm_dir: str) -> str:
    """The documented ports and shared-memory directory -> the test's."""
    text = re.sub(r"\b(127\.0\.0\.1|localhost):8000\b", f"127.0.0.1:{live.port}", text)
    text = re.sub(r"\b(127\.0\.0\.1|localhost):8001\b", f"127.0.0.1:{live.binary_port}", text)
    return text.replace("/dev/shm", shm_dir)


def shell_env(live, shm_dir) -> dict:
    bindir = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "POSENC_SHM_DIR": shm_dir,
            "POSENC_API_KEY": API_KEY, "POSENC_PORT": str(live.port),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "service"), os.environ.get("PYTHONPATH")]))}


# --- one runner per language ---------------------------------------------------------------------------


def run_python(block: Block, namespace: dict, text: str) -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        exec(compile(text, block.where, "exec"), namespace)


def run_sh(block: Block, text: str, cwd: Path, env: dict) -> None:
    script = 'set -eo pipefail\ncurl() { command curl --fail-with-body -sS "$@"; }\n' + text
    done = subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{block.where}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"


def run_console(block: Block, text: str, cwd: Path, env: dict) -> None:
    """Each `$ command` runs; what it prints must be the lines under it (exit status as the tool says)."""
    steps, current = [], None
    for line in text.splitlines():
        if line.startswith("$ "):
            current = [line[2:], []]
            steps.append(current)
        else:
            current[1].append(line)
    for command, expected in steps:
        done = subprocess.run(["bash", "-c", "set -o pipefail\n" + command], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.stdout.rstrip("\n").splitlines() == expected, f"{block.where}: {command}\n{done.stderr[-2000:]}"


def run_c(block: Block, text: str, cwd: Path, env: dict) -> None:
    source = cwd / f"example_{block.line}.c"
    source.write_text(text)
    # C++: GCC 12's own avx512fintrin.h (`__m512i __Y = __Y;`) trips -Wuninitialized once inlined; not the example's.
    for compiler, flags in (("cc", ["-std=c11", "-x", "c"]),
                            ("g++", ["-std=c++17", "-x", "c++", "-Wno-error=uninitialized"])):
        exe = cwd / f"example_{block.line}_{compiler}"
        built = subprocess.run([compiler, *flags, "-O1", "-Wall", "-Werror", "-I", str(ROOT / "native" / "include"),
                                str(source), "-o", str(exe), "-lm"], capture_output=True, text=True)
        assert built.returncode == 0, f"{block.where} as {compiler} {flags[0]}:\n{built.stderr}"
        done = subprocess.run([str(exe)], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"{block.where} ({compiler}): exit {done.returncode}\n{done.stdout}{done.stderr}"


def run_go(block: Block, text: str, cwd: Path, env: dict) -> None:
    module = cwd / f"go_example_{block.line}"
    module.mkdir(exist_ok=True)
    (module / "go.mod").write_text("module example\n\ngo 1.19\n\nrequire posenc.dev/posenc v0.0.0\n\n"
                                   f"replace posenc.dev/posenc => {ROOT / 'clients' / 'go'}\n")
    (module / "main.go").write_text(text)
    done = subprocess.run(["go", "run", "."], check=False, cwd=module, env={**env, "GOPROXY": "off"}, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, f"{block.where}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"


def run_java(block: Block, text: str, cwd: Path, env: dict) -> None:
    built = subprocess.run([str(ROOT / "clients" / "java" / "build-harness")], check=False, capture_output=True,
                           text=True)
    assert built.returncode == 0, f"{block.where}: building the Java client failed:\n{built.stderr[-4000:]}"
    source = cwd / f"Example{block.line}.java"
    source.write_text(text)
    done = subprocess.run(["java", "-cp", built.stdout.strip(), str(source)], check=False, cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{block.where}: exit {done.returncode}\n{done.stdout}{done.stderr[-4000:]}"


def parse_data(block: Block, text: str) -> None:
    {"toml": tomllib.loads, "json": json.loads, "yaml": yaml.safe_load}[block.lang](text)


@pytest.mark.parametrize("page", [p for p in PAGES if any(b.lang != "text" and not b.skip for b in blocks(p))],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_the_examples_of_a_page_run(page, live, shm_dir, workdir, monkeypatch):
    monkeypatch.chdir(workdir)
    monkeypatch.setenv("POSENC_SHM_DIR", shm_dir)
    env = shell_env(live, shm_dir)
    for block in blocks(page):
        if block.skip or block.lang == "text":
            continue
        text = rewrite(block.text, live, shm_dir)
        if block.lang == "python":
            run_python(block, {"__name__": f"docs_{page.stem}_{block.line}"}, text)
        elif block.lang == "sh":
            run_sh(block, text, workdir, env)
        elif block.lang == "console":
            run_console(block, text, workdir, env)
        elif block.lang == "c":
            run_c(block, text, workdir, env)
        elif block.lang == "go":
            run_go(block, text, workdir, env)
        elif block.lang == "java":
            run_java(block, text, workdir, env)
        else:
            parse_data(block, text)
