"""`posenc explore --serve`: the service it starts listens where --url says (no binary sidecar unless
asked), and a start that fails is an error naming the address that leaves no process behind (issue 39).

Processes are found by their command line in /proc: the started `posenc serve --host H --port P` and
the workers it forks carry it, whoever their parent is by then."""

from __future__ import annotations

import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from posenc.cli import main
from posenc.cli.explore import ServiceNotStarted, start_service
from posenc.http.runtime.launch import free_port

SERVICE_DIR = Path(__file__).resolve().parent.parent / "service"
#: A first start compiles the kernels (73 s on the shared 2-vCPU machine); the test waits as long as the command.
START_S = 300


def serve_processes(port: int) -> list[tuple[int, list[str]]]:
    """(pid, argv) of every live process running `posenc.cli serve ... --port <port>`."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().decode(errors="replace").split("\0")
            state = (cmdline.parent / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:  # exited while we looked
            continue
        if state != "Z" and "posenc.cli" in argv and "serve" in argv and "--port" in argv \
                and argv[argv.index("--port") + 1] == str(port):
            found.append((int(cmdline.parent.name), argv))
    return found


def serve_children() -> list[int]:
    """Pids of this test process's children running `posenc.cli serve` (whatever their flags)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            argv = (stat.parent / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == os.getpid() and b"posenc.cli" in argv and b"serve" in argv:
            found.append(int(stat.parent.name))
    return found


def gone(port: int, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while serve_processes(port) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not serve_processes(port)


@pytest.fixture
def shm_dir(monkeypatch):
    """A private table store for whatever service the test starts (the child inherits the environment)."""
    root = tempfile.mkdtemp(prefix="posenc-explore-cli-", dir="/dev/shm")
    monkeypatch.setenv("POSENC_SHM_DIR", root)
    monkeypatch.setenv("POSENC_WORKERS", "1")
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_a_taken_port_is_named_and_nothing_is_started(shm_dir, capsys):
    """Something listens at --url's port but is not the service: before the fix a service was started on
    8000/8001 anyway, waited for at --url for a minute and left running."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        started = time.monotonic()
        assert main(["explore", "--serve", "--url", f"http://127.0.0.1:{port}", "--no-browser"]) == 1
        assert time.monotonic() - started < 10
    err = capsys.readouterr().err
    assert f"cannot start the service at 127.0.0.1:{port}: Address already in use" in err
    assert f"port {port} is taken" in err
    assert gone(port) and serve_children() == []


def test_a_service_that_exits_is_reported(shm_dir, monkeypatch, capfd):
    monkeypatch.setenv("POSENC_WORKERS", "many")  # `posenc serve` refuses it and exits 2
    port = free_port()
    assert main(["explore", "--serve", "--url", f"http://127.0.0.1:{port}", "--no-browser"]) == 1
    err = capfd.readouterr().err
    assert "POSENC_WORKERS: must be an integer" in err  # the service's own message, then explore's
    assert f"posenc serve at 127.0.0.1:{port} exited with status 2 before it answered" in err
    assert gone(port)


def test_a_start_that_times_out_ends_the_service(shm_dir):
    """The service has not answered when the time is up: its whole process group is ended."""
    port = free_port()
    with pytest.raises(ServiceNotStarted) as info:  # no time at all: a warm service starts within a second
        start_service(f"http://127.0.0.1:{port}", timeout_s=0.0)
    assert f"127.0.0.1:{port} did not answer" in str(info.value)
    assert gone(port)


@pytest.mark.parametrize("url, message", [("https://127.0.0.1:18600", "plain-HTTP"),
                                          ("http://127.0.0.1:99999", "no valid port"),
                                          ("http://192.0.2.1:18600", "not an address of this machine")])
def test_urls_it_cannot_serve(url, message, capsys):
    assert main(["explore", "--serve", "--url", url, "--no-browser"]) == 1
    assert message in capsys.readouterr().err


def _readline(stream, timeout_s: float) -> str:
    ready, _, _ = select.select([stream], [], [], timeout_s)
    return stream.readline() if ready else ""


def test_the_started_service_listens_at_the_url_and_stops_with_the_command(shm_dir):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": f"{SERVICE_DIR}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    explore = subprocess.Popen([sys.executable, "-m", "posenc.cli", "explore", "--serve", "--url", url,
                                "--no-browser"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        assert _readline(explore.stdout, START_S).strip() == f"{url}/explore"
        with urllib.request.urlopen(f"{url}/explore", timeout=10) as page:
            assert page.status == 200
        (pid, argv), *workers = serve_processes(port)
        assert argv[argv.index("--host") + 1] == "127.0.0.1" and argv[argv.index("--binary-port") + 1] == "0"
        sidecars = [p for p in Path("/proc").glob("[0-9]*") if p.name != str(pid) and _in_group(p, pid)
                    and b"posenc-server" in _cmdline(p)]
        assert sidecars == []  # no binary sidecar unless asked
    finally:
        explore.send_signal(signal.SIGTERM)
        status = explore.wait(timeout=60)
    assert status == 130 and gone(port)
    assert not [f for f in os.listdir(shm_dir) if f.startswith("posenc.")]  # the service removed its tables


def _cmdline(proc: Path) -> bytes:
    try:
        return (proc / "cmdline").read_bytes()
    except OSError:
        return b""


def _in_group(proc: Path, pgid: int) -> bool:
    try:
        return int((proc / "stat").read_text().rsplit(")", 1)[1].split()[2]) == pgid
    except (OSError, IndexError, ValueError):
        return False
