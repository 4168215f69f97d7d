"""`posenc serve` with its HTTP port taken: one line naming the address, a non-zero exit, and nothing
built first (issue 39: uvicorn said "[Errno 98] Address already in use" without the port, exit 3,
after the tables were published)."""

import socket
import subprocess
import sys


def test_serve_names_the_http_address_it_cannot_listen_on(tmp_path):
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn's own socket would be
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run([sys.executable, "-m", "posenc.cli", "serve", "--port", str(port),
                                 "--binary-port", "0", "--shm-dir", str(tmp_path), "--workers", "1"],
                                capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.splitlines() == [
        f"posenc: error: port: HTTP cannot listen on 127.0.0.1:{port}: Address already in use (another process "
        "listens there: stop it, or choose another port with --port)"]
    assert list(tmp_path.iterdir()) == []  # refused before a table (or the registry) was written
