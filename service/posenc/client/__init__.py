"""Clients of the posenc service: the native binary protocol (docs/protocol.md; sync, asyncio,
pipelining) and HTTP (`HttpClient`, `AsyncHttpClient`: binary formats, numpy arrays out).

    >>> from posenc.client import Client
    >>> with Client("127.0.0.1:8001") as c:
    ...     rows = c.encode("sin128", [0, 1, 4096])          # a table published in shared memory
    ...     rows = c.encode_spec(posenc.RopeSpec(128), [7])   # any spec, computed by the server
    ...     c.stats()["requests_total"]

`fetch_stats(address)` is the one-call form the HTTP `/metrics` export uses.

The names import their module on first use (`posenc._lazy`): `posenc serve` needs only
`process` (the sidecar) and `sync` (the metrics export), not httpx or asyncio, at start-up.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:  # the names as type checkers see them; at run time __getattr__ imports them
    from .address import DEFAULT_ADDRESS, parse_address
    from .aio import AsyncClient
    from .calls import TableRef
    from .http import AsyncHttpClient, HttpClient, HttpError, ServiceUnreachable
    from .process import ServerProcess, server_argv, server_binary, service_argv, start_server
    from .protocol import ProtocolError, ServerError, Status
    from .sync import Client, Pipeline, fetch_stats

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
__getattr__, __dir__ = lazy_exports(__name__, {
    "DEFAULT_ADDRESS": "address", "parse_address": "address", "AsyncClient": "aio", "TableRef": "calls",
    "AsyncHttpClient": "http", "HttpClient": "http", "HttpError": "http", "ServiceUnreachable": "http",
    "ServerProcess": "process", "server_argv": "process", "server_binary": "process", "service_argv": "process",
    "start_server": "process", "ProtocolError": "protocol", "ServerError": "protocol", "Status": "protocol",
    "Client": "sync", "Pipeline": "sync", "fetch_stats": "sync",
})
