"""Raw HTTP/1.1 on a socket, for the tests that judge the service's bytes (the hostile client, the
connection's states): send a byte stream in pieces, read until the server closes, parse the answers."""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass

import httptools


@dataclass
class Answer:
    status: int
    headers: dict
    body: bytes


def parse_answers(data: bytes) -> list[Answer]:
    """Every complete response in `data`, in order (a 100 Continue is one too)."""
    answers: list[Answer] = []

    class Sink:
        def on_message_begin(self):
            self.headers, self.body = {}, b""

        def on_header(self, name, value):
            self.headers[name.decode().lower()] = value.decode("latin-1")

        def on_body(self, body):
            self.body += body

        def on_message_complete(self):
            answers.append(Answer(parser.get_status_code(), self.headers, self.body))

    parser = httptools.HttpResponseParser(Sink())
    parser.feed_data(data)
    return answers


def converse(port: int, steps: list[tuple[bytes, float]], half_close: bool = False, timeout_s: float = 8.0) -> bytes:
    """Send each step's bytes (its own write), pausing its seconds after it (a pause lets the server
    reach a state: an answer written, a stream under way); optionally shut the sending side; then
    read until the server closes (or timeout_s)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for data, pause_s in steps:
            try:
                s.sendall(data)
            except (BrokenPipeError, ConnectionResetError):
                break  # the server closed after an answer that ends the connection
            time.sleep(pause_s)
        if half_close:
            try:
                s.shutdown(socket.SHUT_WR)
            except OSError:
                pass
        got = bytearray()
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                chunk = s.recv(1 << 20)
                if not chunk:
                    break
                got += chunk
        except (socket.timeout, ConnectionResetError):
            pass
        return bytes(got)
