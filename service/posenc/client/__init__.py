"""Clients of the posenc service: the native binary protocol (docs/protocol.md; sync, asyncio,
pipelining) and HTTP (`HttpClient`, `AsyncHttpClient`: binary formats, numpy arrays out).

    >>> from posenc.client import Client
    >>> with Client("127.0.0.1:8001") as c:
    ...     rows = c.encode("sin128", [0, 1, 4096])          # a table published in shared memory
    ...     rows = c.encode_spec(posenc.RopeSpec(128), [7])   # any spec, computed by the server
    ...     c.stats()["requests_total"]

`fetch_stats(address)` is the one-call form the HTTP `/metrics` export uses.
"""

from .address import DEFAULT_ADDRESS, parse_address
from .aio import AsyncClient
from .calls import TableRef
from .http import AsyncHttpClient, HttpClient, HttpError, ServiceUnreachable
from .process import ServerProcess, server_argv, server_binary, service_argv, start_server
from .protocol import ProtocolError, ServerError, Status
from .sync import Client, Pipeline


def fetch_stats(address=DEFAULT_ADDRESS, *, timeout: float = 2.0) -> dict:
    """The server's STATS (counters, open connections, limits) as a dict; raises OSError when
    the server is unreachable."""
    with Client(address, timeout=timeout) as client:
        return client.stats()


__all__ = [
    "DEFAULT_ADDRESS",
    "AsyncClient",
    "AsyncHttpClient",
    "Client",
    "HttpClient",
    "HttpError",
    "Pipeline",
    "ProtocolError",
    "ServerError",
    "ServerProcess",
    "ServiceUnreachable",
    "Status",
    "TableRef",
    "fetch_stats",
    "parse_address",
    "server_argv",
    "server_binary",
    "service_argv",
    "start_server",
]
