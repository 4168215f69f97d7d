"""The protocol lane's shortcuts read a request as uvicorn's own code does.

`_path_and_query` splits an origin-form target at its first "?" instead of calling
`httptools.parse_url`, and `_http_1_1` asks llhttp whether it keeps the request alive before
formatting its version. Both are checked against what they stand for, over every request the
parser accepts: every HTTP version and Connection header, and targets drawn from every byte.
"""

from __future__ import annotations

import httptools
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc.http.transport.protocol import _http_1_1, _path_and_query


class _Head:
    """Parser callbacks that keep the request target."""

    def __init__(self):
        self.url = b""

    def on_url(self, url: bytes) -> None:
        self.url += url


def _parsed(request: bytes):
    """(parser, head) after feeding `request`, or None when llhttp refuses it."""
    head = _Head()
    parser = httptools.HttpRequestParser(head)
    try:
        parser.feed_data(request)
    except httptools.HttpParserError:
        return None
    return parser, head


_VERSIONS = [f"{major}.{minor}".encode() for major in range(10) for minor in range(10)]
_CONNECTION = [None, b"close", b"keep-alive", b"Keep-Alive", b"upgrade", b"keep-alive, close", b"te", b""]


def test_http_1_1_is_the_parsers_version_for_every_version_and_connection_header():
    accepted = 0
    for version in _VERSIONS:
        for connection in _CONNECTION:
            lines = [b"GET / HTTP/" + version, b"Host: x"]
            if connection is not None:
                lines.append(b"Connection: " + connection)
            found = _parsed(b"\r\n".join(lines) + b"\r\n\r\n")
            if found is None:
                continue
            accepted += 1
            parser, _ = found
            expected = parser.get_http_version() == "1.1"
            assert _http_1_1(parser, connection is not None) == expected, (version, connection)
    assert accepted == 4 * len(_CONNECTION)  # 0.9, 1.0, 1.1 and 2.0, each with every Connection header


_TARGET_BYTES = st.sampled_from([b"/", b"?", b"#", b"%", b";", b"a", b"0", b":", b"@", b"=", b"&", b".",
                                 b"\x80", b"\xff", b"\x7f", b"\t", b" ", b"*", b"http://h", b"//"])


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.one_of(_TARGET_BYTES, st.binary(min_size=1, max_size=3)), min_size=1, max_size=12))
def test_path_and_query_is_parse_urls_for_every_target_the_parser_accepts(pieces):
    target = b"".join(pieces)
    found = _parsed(b"GET " + target + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    if found is None:
        return
    url = found[1].url
    try:
        parsed = httptools.parse_url(url)
        expected = (None, b"") if parsed.path is None else (parsed.path.decode("ascii"), parsed.query or b"")
    except (httptools.HttpParserInvalidURLError, UnicodeDecodeError):
        expected = (None, b"")
    assert _path_and_query(url) == expected, url
