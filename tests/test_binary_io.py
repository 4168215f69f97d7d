"""posenc-server's event loops (--io auto|uring|epoll): the ready line and STATS name the loop that
runs, auto falls back to epoll where io_uring cannot run, and a forced uring the kernel refuses is a
clear start-up error (exit 2). The behaviour of each loop is tested by the other test_binary_*
modules, which run once on each loop (binary_support.server_io)."""

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from binary_support import IO_LOOPS, ROOT, build, running_server, server_io, table_store, uring_refusal  # noqa: F401
from posenc.client import Client, server_argv, server_binary

DISABLED = "/proc/sys/kernel/io_uring_disabled"


def test_ready_line_and_stats_name_the_loop(server_io):
    with table_store({}) as (_, root), running_server(root, threads=1) as srv, Client(srv.address) as c:
        assert f" io={server_io} " in srv.ready_line
        assert c.stats()["io"] == server_io


def test_auto_picks_io_uring_where_it_can_run():
    if uring_refusal():
        pytest.skip(f"no io_uring loop here: {uring_refusal()}")
    with table_store({}) as (_, root), running_server(root, threads=1, io="auto") as srv, Client(srv.address) as c:
        assert " io=uring " in srv.ready_line and c.stats()["io"] == "uring"


def test_an_unknown_loop_is_refused():
    build()
    out = subprocess.run([server_binary(), "--io", "kqueue"], capture_output=True, text=True, timeout=10)
    assert out.returncode == 2 and "--io: must be auto, uring or epoll, got 'kqueue'" in out.stderr


def test_server_argv_passes_io():
    argv = server_argv(port=0, io="epoll")
    assert argv[argv.index("--io") + 1] == "epoll"


def run_with_io_uring_disabled(io: str) -> subprocess.CompletedProcess:
    """posenc-server --io IO where /proc/sys/kernel/io_uring_disabled reads 2 (the kernel refuses io_uring
    to every process): the file is bind-mounted over in a private user and mount namespace, so nothing
    outside this one process changes. A server that starts gets a second to print its ready line, then
    SIGTERM."""
    if not shutil.which("unshare") or not Path(DISABLED).exists():
        pytest.skip(f"needs unshare(1) and {DISABLED}")
    with tempfile.TemporaryDirectory() as tmp:
        two = Path(tmp) / "io_uring_disabled"
        two.write_text("2\n")
        script = (f"mount --bind {two} {DISABLED} || exit 99; "
                  f"exec timeout -s TERM 1 {server_binary()} --io {io} --port 0 --threads 1 --shm-dir {tmp}")
        out = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=30)
    if out.returncode == 99 or "unshare:" in out.stderr:
        pytest.skip(f"cannot bind-mount over {DISABLED} in a user namespace here: {out.stderr.strip()}")
    return out


def test_forced_uring_that_the_kernel_refuses_exits_2_saying_why():
    build()
    out = run_with_io_uring_disabled("uring")
    assert out.returncode == 2, out
    assert out.stderr.startswith(f"posenc-server: --io uring: the kernel refuses io_uring ({DISABLED} is 2"), out.stderr
    assert "ready" not in out.stdout


def test_auto_falls_back_to_epoll_and_says_so():
    build()
    out = run_with_io_uring_disabled("auto")
    assert " io=epoll " in out.stdout, out
    assert "--io auto: the kernel refuses io_uring" in out.stderr and "serving with epoll" in out.stderr


def test_a_build_without_liburing_serves_with_epoll(tmp_path):
    """The Makefile's fallback: with HAVE_URING empty (what it finds without liburing, or with a cross
    compiler lacking its target's liburing) the server has the epoll loop only, and says so."""
    build_dir = tmp_path / "build"
    # the kernel library's objects do not depend on the loop: reuse them (copied with their times)
    shutil.copytree(build() / "server-obj" / "lib", build_dir / "obj" / "lib")
    subprocess.run(["make", "-s", "-j4", "-C", str(ROOT / "native" / "server"), "HAVE_URING=", f"BUILD={build_dir}",
                    f"OBJ={build_dir}/obj"], check=True, capture_output=True)
    binary = str(build_dir / "posenc-server")
    symbols = subprocess.run(["nm", binary], capture_output=True, text=True).stdout
    assert "io_uring" not in symbols
    out = subprocess.run([binary, "--io", "uring"], capture_output=True, text=True, timeout=10)
    assert out.returncode == 2 and "built without liburing" in out.stderr
    with table_store({}) as (_, root):
        argv = [binary, "--io", "auto", "--port", "0", "--threads", "1", "--shm-dir", str(root)]
        started = subprocess.run(["timeout", "-s", "TERM", "1", *argv], capture_output=True, text=True, timeout=30)
    assert " io=epoll " in started.stdout, started
