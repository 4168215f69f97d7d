"""Where a posenc binary server listens: "host:port", "tcp://host:port", "[::1]:port",
"unix:/path" / "unix:///path", a filesystem path, or a (host, port) tuple."""

from __future__ import annotations

import socket
from dataclasses import dataclass

from ..errors import PosencError
from .protocol import DEFAULT_PORT

DEFAULT_ADDRESS = f"127.0.0.1:{DEFAULT_PORT}"


@dataclass(frozen=True)
class Address:
    family: int  # socket.AF_INET / AF_INET6 / AF_UNIX
    target: object  # (host, port) or a path

    def __str__(self) -> str:
        if self.family == socket.AF_UNIX:
            return f"unix:{self.target}"
        host, port = self.target
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def parse_address(address) -> Address:
    if isinstance(address, Address):
        return address
    if isinstance(address, tuple) and len(address) == 2:
        host, port = address
        return _tcp(str(host), port)
    if not isinstance(address, str) or not address:
        raise PosencError("address", f"must be 'host:port' or 'unix:/path', got {address!r}")
    if address.startswith("unix:"):
        path = address[len("unix:"):]
        path = path[2:] if path.startswith("///") else path
        return Address(socket.AF_UNIX, path)
    if address.startswith(("/", "./")):
        return Address(socket.AF_UNIX, address)
    rest = address.removeprefix("tcp://")
    host, sep, port = rest.rpartition(":")
    if not sep or not host:
        raise PosencError("address", f"{address!r} needs a port ('host:port')")
    return _tcp(host.strip("[]"), port)


def _tcp(host: str, port) -> Address:
    try:
        port = int(port)
    except (TypeError, ValueError):
        raise PosencError("address", f"port must be an integer, got {port!r}") from None
    if not 0 < port < 65536:
        raise PosencError("address", f"port must be in 1..65535, got {port}")
    return Address(socket.AF_INET6 if ":" in host else socket.AF_INET, (host, port))


def connect(address, timeout: float | None) -> socket.socket:
    """A connected blocking socket (TCP_NODELAY on TCP)."""
    addr = parse_address(address)
    sock = socket.socket(addr.family, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(addr.target)
        if addr.family != socket.AF_UNIX:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except BaseException:
        sock.close()
        raise
    return sock
