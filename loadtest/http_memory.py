"""Worst-case memory of one HTTP worker under hostile clients (the figure docs/deploy.md states).

    .venv/bin/python loadtest/http_memory.py [--clients 12] [--hold-s 8]

Starts `posenc serve` with one worker, no tables and the default [limits] (max_output_bytes
256 MiB, max_body_bytes 8 MiB, max_buffered_bytes 1 GiB; the first and last can be changed),
then opens, all at once and with a 4 KiB receive buffer so nothing drains:
  * `clients` connections that ask for the largest binary response (max_output_bytes) and never read it,
  * `clients` that ask for the largest JSON response the cap allows (~1/4 of that array) and never read it,
  * `clients` that send 8 MiB bodies and stop 1 byte short,
holds them for `hold_s`, and reports the worker's peak RSS (VmHWM) and the answers the others got.
"""

from __future__ import annotations

import argparse
import socket
import time

import orjson

from posenc.http.runtime.launch import ServerProcess

CONFIG = """
[server]
workers = 1
binary_port = 0
shm_dir = "/dev/shm"
body_timeout_s = 60
[limits]
max_output_bytes = {max_output}
max_buffered_bytes = {buffered}
"""


def post(port: int, body: bytes, accept: str, send_all: bool = True) -> socket.socket:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    head = (f"POST /v1/sinusoidal HTTP/1.1\r\nHost: x\r\nAccept: {accept}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    try:
        s.sendall(head + (body if send_all else body[:-1]))
    except OSError:  # refused (503 + close) before the body was all sent
        pass
    return s


def peak_rss_mib(pid: int) -> tuple[float, float]:
    fields = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status"))
    return int(fields["VmHWM"].split()[0]) / 1024, int(fields["VmRSS"].split()[0]) / 1024


def status_of(s: socket.socket) -> str:
    s.settimeout(0.5)
    try:
        return s.recv(12).decode(errors="replace")[9:12] or "closed"
    except OSError:
        return "pending"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=12)
    parser.add_argument("--hold-s", type=float, default=8.0)
    parser.add_argument("--max-output-mib", type=int, default=256, help="[limits] max_output_bytes")
    parser.add_argument("--buffered-mib", type=int, default=1024, help="[limits] max_buffered_bytes")
    args = parser.parse_args()
    max_output = args.max_output_mib << 20
    rows = max_output // (128 * 4)  # the largest float32 array of width 128
    json_rows = max_output // (128 * 17) // 4096 * 4096  # the largest the JSON worst case admits
    binary = orjson.dumps({"spec": {"dim": 128}, "positions": list(range(rows))})
    text = orjson.dumps({"spec": {"dim": 128}, "positions": list(range(json_rows))})
    head = b'{"spec":{"dim":8},"positions":['
    padding = head + b"0," * (((8 << 20) - len(head) - 2) // 2) + b"0]"  # just under max_body_bytes
    with ServerProcess(CONFIG.format(max_output=max_output, buffered=args.buffered_mib << 20)) as server:
        pid = server.process.pid
        idle = peak_rss_mib(pid)
        sockets = []
        for _ in range(args.clients):
            sockets.append(("binary", post(server.port, binary, "application/octet-stream")))
            sockets.append(("json", post(server.port, text, "application/json")))
            sockets.append(("slow-body", post(server.port, padding, "application/json", send_all=False)))
        time.sleep(args.hold_s)
        peak, now = peak_rss_mib(pid)
        answers: dict[str, dict[str, int]] = {}
        for kind, s in sockets:
            status = status_of(s)
            answers.setdefault(kind, {})[status] = answers.get(kind, {}).get(status, 0) + 1
            s.close()
        print(f"worker {pid}: idle RSS {idle[1]:.0f} MiB; under {len(sockets)} hostile clients peak RSS "
              f"{peak:.0f} MiB (now {now:.0f} MiB)")
        print("answers:", answers)


if __name__ == "__main__":
    main()
