"""`posenc serve` with its binary port taken: it stops with the sidecar's own reason instead of
serving HTTP, reporting ready, while another process answers on that port (issue 26)."""

import socket
import subprocess
import sys

from binary_support import build


def test_serve_stops_when_the_binary_sidecar_cannot_listen(tmp_path):
    build()
    with socket.socket() as taken, socket.socket() as http_probe:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        http_probe.bind(("127.0.0.1", 0))
        http_port = http_probe.getsockname()[1]
        http_probe.close()
        result = subprocess.run([sys.executable, "-m", "posenc.cli", "serve", "--port", str(http_port),
                                 "--binary-port", str(taken.getsockname()[1]), "--shm-dir", str(tmp_path),
                                 "--workers", "1"], capture_output=True, text=True, timeout=180)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "posenc: error: sidecar binary: the binary server did not start, so posenc serve stops" in result.stderr
    assert "in use" in result.stderr.lower()
    assert "Uvicorn running" not in result.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["posenc-registry"]  # the published tables were removed
