"""The Go client's own checks (clients/go): gofmt-clean, `go vet`, and its unit tests (framing, reply
decoding, float16/bfloat16 widening, errors, the pool's retry, the shared-memory reader's registry
checks), with GOPROXY=off: the module uses the standard library alone. The shared tests against a live
server are tests/test_clients.py's."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

GO_CLIENT = Path(__file__).resolve().parents[1] / "clients" / "go"


def go(*args: str) -> subprocess.CompletedProcess:
    if shutil.which("go") is None:
        pytest.fail("`go` is not on PATH (`make test` installs Debian's golang-go: Makefile CLIENT_PACKAGES)")
    return subprocess.run(["go", *args], cwd=GO_CLIENT, env={**os.environ, "GOPROXY": "off"}, capture_output=True,
                          text=True, timeout=300, check=False)


def test_the_go_client_is_formatted_and_vetted():
    unformatted = subprocess.run(["gofmt", "-l", "."], cwd=GO_CLIENT, capture_output=True, text=True, check=True)
    assert unformatted.stdout == "", f"gofmt would change: {unformatted.stdout}"
    vet = go("vet", "./...")
    assert vet.returncode == 0, vet.stderr


def test_the_go_unit_tests_pass():
    done = go("test", "-count=1", "./...")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
