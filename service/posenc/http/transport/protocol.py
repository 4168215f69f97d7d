"""uvicorn's httptools protocol plus the connection guards uvicorn lacks.

Before a request reaches any ASGI code a client could hold a connection open forever by
sending its head slowly (uvicorn only times out idle keep-alive connections), send an
unbounded head, or stop reading a large response. Here:
  * the request line and headers must arrive within `header_timeout_s` of the connection
    or of the request's first byte, else 408 and close (one sweep over the open connections
    every header_timeout_s/4, at most 1 s, rather than a timer per request: the hot path
    only notes a timestamp);
  * they may total at most `max_head_bytes`, else 431 and close;
  * a response whose bytes the client does not drain for `body_timeout_s` aborts the connection;
  * a malformed request gets the service's JSON error body (400) instead of uvicorn's text;
  * a client that half-closes after sending its requests still gets their answers (uvicorn
    closes at once), then the connection closes;
  * a connection ends once: after the response that closes it (Connection: close, HTTP/1.0, a
    rejection) nothing more of what the client sent is parsed or run, even requests already in
    the same read, and the close lingers (`_finish`): the sending side is shut, what the client
    still sends is read and dropped for up to LINGER_S, so the kernel does not answer it with a
    reset that would destroy the response in flight;
  * a malformed request pipelined behind good ones is answered (400, 431, 408, 501) after their
    responses, in request order, never before -- a response still streaming included; every
    rejection carries X-Request-Id. The request being parsed when the connection stops parsing
    (a rejection, the client's half-close) is dropped: queued, it never runs; running (reading its
    body), it sees the client gone and answers nothing;
  * a transfer coding other than chunked is a 501 (the body cannot be delimited or decoded);
  * an Upgrade (h2c, WebSocket, anything) is ignored, as RFC 9110 section 7.8 allows: the request
    is answered over HTTP/1.1 and the connection goes on (llhttp ends an upgrade request at its
    head and hands the rest back as another protocol's bytes: `_after_upgrade` parses the rest as
    HTTP/1.1, the request's body first). The app refuses a WebSocket handshake with a JSON 400;
  * `Expect: 100-continue` gets its interim 100 only while the body is still to come when the
    app first reads it: a request whose body is already here is answered at once, whichever way
    it is answered (RFC 9110 section 10.1.1 allows either; one behaviour for every path);
  * every request of the connection whose answer is not written yet -- the running one, the
    queued ones -- learns that the client is gone when the connection ends (uvicorn tells only the
    last one parsed), so a response cut off by the write-stall guard or a reset ends quietly.
The limits are per process, set from the service config by `configure()` when the app is built.

And one cost uvicorn's protocol pays on every response: it writes the head (at
`http.response.start`) and the body with two `write` calls, two syscalls and two TCP segments
for a response of a few hundred bytes. Here each request's cycle writes through a `_HeadHolder`,
which keeps the head until the body's first bytes and writes both with one `writelines` (uvloop:
one `writev`); a response that completes with no body write (HEAD) or whose connection closes
first still gets its head, at once.

Requests the app can answer without awaiting anything (its `answer_now`: the row route and the
prepared plans of the commonest computed requests, asgi.py / prepared.py) are answered here, in
the protocol, once their message is complete: no ASGI task, receive or send, which cost more than
the answer. A plain HTTP/1.1 request (no response pending before it, no upgrade, no Expect:
100-continue) takes the lane: uvicorn's scope and request cycle are not even made; its body is
kept, and `answer_now` gets a scope of its method, path, query string and headers. What the lane
cannot answer -- a body still on its way at the end of a read (the app reads it, under its
deadline), more than uvicorn's 64 KiB read high-water mark of body, a percent-encoded path, a
transport that is not draining its writes, anything `answer_now` declines -- gets the scope,
cycle and task uvicorn would have made at its head (`_to_the_app`), its body handed over. The
other requests get them at their head, as in uvicorn, with the task held back while the head is
parsed so that `answer_now` may still answer a message complete in the same read; a pipelined
request waits in uvicorn's queue. Responses stay in request order.

Keep-alive: uvicorn cancels a timer when a request's data arrives and arms a new one when its
response completes, ~1.5 us a request. Here a connection has one timer at a time: data arriving
marks it busy, a response notes its time, and the timer, when it fires, closes the connection if
it has been idle for timeout_keep_alive since then, or re-arms itself for the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

import httptools
from uvicorn.protocols.http.flow_control import HIGH_WATER_LIMIT
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from ..api.errors import REQUEST_ID, error_body
from ..pipeline.headers import REQUEST_ID_HEADER, render, request_id_from, tokens
from ..runtime.metrics import count_rejection

#: How long a closing connection keeps reading (and dropping) what the client still sends after
#: the last response, and how many bytes at most, before it closes for good.
LINGER_S = 2.0
LINGER_BYTES = 1 << 20


@dataclass
class Guards:
    header_timeout_s: float = 10.0
    max_head_bytes: int = 64 << 10
    write_stall_s: float = 30.0


GUARDS = Guards()


def configure(header_timeout_s: float, max_head_bytes: int, write_stall_s: float) -> None:
    GUARDS.header_timeout_s = header_timeout_s
    GUARDS.max_head_bytes = max_head_bytes
    GUARDS.write_stall_s = write_stall_s


class _Refused(Exception):
    """Raised inside a parser callback to stop parsing a request the protocol refuses by its head
    (over the size limit, a transfer coding it cannot decode); send_400_response then answers
    the connection's `_refusal`."""


class _ConnectionDone(Exception):
    """Raised inside a parser callback when a request begins after the connection's last response:
    the parser stops, and nothing of that request is run or answered."""


def _sweep(loop, connections: set) -> None:
    """408 every connection whose request head is overdue; runs every interval on its loop."""
    now = loop.time()
    for connection in list(connections):
        since = getattr(connection, "_head_since", None)
        if since is not None and now - since > GUARDS.header_timeout_s:
            connection._head_timed_out()
    loop.call_later(_sweep_interval(), _sweep, loop, connections)


def _sweep_interval() -> float:
    return min(1.0, GUARDS.header_timeout_s / 4)


STATUS_200 = STATUS_LINE[200]
#: (uvicorn's default headers, their head lines): uvicorn makes a new list each second
_defaults = [None, b""]


def _default_lines(defaults: list) -> bytes:
    """The head lines of uvicorn's default headers (Date, Server), rendered once per list."""
    if defaults is not _defaults[0]:
        _defaults[:] = defaults, render(defaults)
    return _defaults[1]


def _http_1_1(parser, connection_header: bool) -> bool:
    """Whether the parsed request is HTTP/1.1. llhttp accepts 0.9, 1.0, 1.1 and 2.0, and keeps a
    request without a Connection header alive only for 1.1 (minor > 0), so that answers it
    without `get_http_version`, which formats a string (~0.4 us a request here)."""
    return (not connection_header and parser.should_keep_alive()) or parser.get_http_version() == "1.1"


_HASH = ord("#")


def _path_and_query(url: bytes) -> tuple[str | None, bytes]:
    """(path, query string) of a request target as uvicorn's scope has them (`httptools.parse_url`,
    the path not yet percent-decoded), or (None, b"") for a target it cannot parse. An origin-form
    target without a fragment is split at its first "?" (what parse_url gives it, a third of the
    cost: the request parser has refused the bytes parse_url refuses); anything else is parse_url's."""
    try:
        if url[:1] == b"/" and _HASH not in url:  # an int: `b"#" in url` costs 10x (buffer protocol)
            path, _, query = url.partition(b"?")
            return path.decode("ascii"), query
        parsed = httptools.parse_url(url)
        if parsed.path is None:  # `*`, or an absolute target without one: uvicorn answers 400
            return None, b""
        return parsed.path.decode("ascii"), parsed.query or b""
    except (httptools.HttpParserInvalidURLError, UnicodeDecodeError):
        return None, b""


class _HeadHolder:
    """A request cycle's transport: the response head (its first write once the response has
    started; a 100 Continue comes before that) is held until the first body write, then both go
    out in one writelines. Flushed too when the response completes without a body write (HEAD,
    an empty body) and before the connection closes. Anything else is the real transport's."""

    __slots__ = ("cycle", "head", "on_response", "passing", "protocol", "transport")

    def __init__(self, cycle, protocol):
        self.cycle = cycle
        self.protocol = protocol
        self.transport = cycle.transport
        self.on_response = cycle.on_response
        self.head = None
        self.passing = False  # once the head is out, writes go straight through

    def write(self, data) -> None:
        if self.passing:
            self.transport.write(data)
        elif self.head is not None:
            head, self.head, self.passing = self.head, None, True
            self.transport.writelines((head, data))
        elif self.cycle.response_started:
            self.head = data
        else:
            self.transport.write(data)  # 100 Continue

    def flush(self) -> None:
        if self.head is not None:
            self.transport.write(self.head)
            self.head = None
        self.passing = True

    def close(self) -> None:
        """uvicorn closes after a response that ends the connection: the protocol's lingering close."""
        self.flush()
        self.protocol.finish()

    def completed(self) -> None:
        self.flush()
        self.on_response()

    def __getattr__(self, name):
        return getattr(self.transport, name)


def _disconnect(cycle) -> None:
    """Mark a request cycle's client gone (what uvicorn's connection_lost does to its last one)."""
    cycle.disconnected = True
    cycle.message_event.set()


def _request_parser(callbacks) -> httptools.HttpRequestParser:
    """A request parser as uvicorn makes one (a response is written to a request pipelined after a
    Connection: close one, which is then not run: see `finish`)."""
    parser = httptools.HttpRequestParser(callbacks)
    try:
        parser.set_dangerous_leniencies(lenient_data_after_close=True)
    except AttributeError:  # httptools < 0.6.3, which uvicorn allows too
        pass
    return parser


def _body_framing(headers) -> bytes | None:
    """The head of a made-up request whose body is framed as the one with these headers is
    (Content-Length, Transfer-Encoding: llhttp accepted them), or None when it has no body."""
    lines = [b"PUT / HTTP/1.1\r\n"]
    for name, value in headers:
        if name == b"content-length" or name == b"transfer-encoding":
            lines += (name, b": ", value, b"\r\n")
    return None if len(lines) == 1 else b"".join(lines) + b"\r\n"


class _BodyOfUpgrade:
    """A parser's callbacks on a connection past an ignored upgrade (`_after_upgrade`): the
    made-up head's own callbacks are dropped, so that the body after it is the upgrade request's;
    every later message's go to the protocol."""

    __slots__ = ("in_head", "protocol")

    def __init__(self, protocol):
        self.protocol = protocol
        self.in_head = True

    def on_message_begin(self) -> None:
        if not self.in_head:
            self.protocol.on_message_begin()

    def on_url(self, url: bytes) -> None:
        if not self.in_head:
            self.protocol.on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self.in_head:
            self.protocol.on_header(name, value)

    def on_headers_complete(self) -> None:
        if self.in_head:
            self.in_head = False
        else:
            self.protocol.on_headers_complete()

    def on_body(self, body: bytes) -> None:
        self.protocol.on_body(body)

    def on_message_complete(self) -> None:
        self.protocol.on_message_complete()


def _answerer(app):
    """The `answer_now` of posenc's app under uvicorn's middleware (None for any other app)."""
    for _ in range(8):
        found = getattr(app, "answer_now", None)
        if found is not None or not hasattr(app, "app"):
            return found
        app = app.app
    return None


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._head_since: float | None = None  # loop time the pending request head started
        self._stall_deadline = None
        self._head_bytes = 0
        self._refusal: tuple | None = None  # (status, code, message, field, reason) of a head refused in a callback
        self._answer_now = _answerer(self.app)
        self._parsing_head = False  # inside on_headers_complete: a task started now may wait for its body
        self._held = None  # (cycle, app) whose task waits for the end of its message
        self._lane = None  # the body so far of a request on its way to answer_now, no cycle made
        self._connection_header = False  # the request being parsed has a Connection header
        self._idle_since: float | None = None  # loop time of the last response (None: busy)
        self._done = False  # the connection's last response is written: nothing more is parsed or run
        self._rejection: bytes | None = None  # a 400/408/431 waiting for the responses ahead of it
        self._eof = False  # the client has half-closed
        self._lingered = 0  # bytes read and dropped since the connection finished
        self._linger_timer = None
        self._answering = None  # the cycle whose ASGI task runs (uvicorn runs one a connection at a time)
        self._upgrade_framing: bytes | None = None  # an ignored upgrade's body framing, see _after_upgrade

    # --- the request head: deadline and size -------------------------------------------
    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._head_since = self.loop.time()
        if not getattr(self.server_state, "posenc_head_sweep", False):  # one sweep per server
            self.server_state.posenc_head_sweep = True
            self.loop.call_later(_sweep_interval(), _sweep, self.loop, self.connections)

    def on_message_begin(self) -> None:
        if self._done:
            raise _ConnectionDone
        # uvicorn's scope is built only for a request that goes to the app (`_to_the_app`)
        self._head_bytes = 0
        self._head_since = self.loop.time()
        self.url = b""
        self.expect_100_continue = False
        self.headers = []
        self._lane = None
        self._connection_header = False

    # on_url and on_header run for every header of every request: counted inline, uvicorn's
    # own two lines of each inline too (a call to the base method costs as much as the work)
    def on_url(self, url: bytes) -> None:
        self._head_bytes += len(url)
        if self._head_bytes > GUARDS.max_head_bytes:
            self._head_over()
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_bytes += len(name) + len(value) + 4
        if self._head_bytes > GUARDS.max_head_bytes:
            self._head_over()
        name = name.lower()
        value = value.rstrip(b" \t")  # llhttp keeps trailing whitespace, which is not the value's (RFC 9110 5.5)
        if name == b"expect" and value.lower() == b"100-continue":
            self.expect_100_continue = True
        elif name == b"connection":
            self._connection_header = True
        elif name == b"transfer-encoding":
            self._check_transfer_coding(value)
        self.headers.append((name, value))

    def _check_transfer_coding(self, value: bytes) -> None:
        """Refuse (501) a request whose body has a transfer coding other than chunked: this server
        decodes no gzip, deflate or compress coding (RFC 9112 section 6.1). llhttp itself refuses
        (400) a request whose last coding is not chunked: its body cannot be delimited."""
        if any(coding != b"chunked" for coding in tokens(value)):
            self._refusal = (501, "not_implemented", f"Transfer-Encoding {value.decode('latin-1')[:100]!r}: this "
                             "server decodes only the chunked transfer coding", "transfer-encoding", "bad_request")
            raise _Refused

    def on_headers_complete(self) -> None:
        self._head_since = None
        parser = self.parser
        if parser.should_upgrade():
            self._upgrade_framing = _body_framing(self.headers)
        elif self._answer_now is not None and not self.expect_100_continue and self.limit_concurrency is None \
                and (self.cycle is None or self.cycle.response_complete) and _http_1_1(parser, self._connection_header):
            self._lane = b""  # the message's body so far: on_message_complete may answer it here
            return
        self._to_the_app(hold=self._answer_now is not None)

    def _should_upgrade(self) -> bool:
        """Never: no route speaks WebSocket (or anything but HTTP/1.1), so uvicorn makes an upgrade
        request an HTTP request like any other (and the app refuses a WebSocket handshake)."""
        return False

    def _after_upgrade(self, rest: bytes) -> None:
        """Go on parsing HTTP/1.1 after llhttp stopped at an upgrade request (it reports the message
        complete at its head and leaves the rest unparsed): a new parser takes the rest, the
        upgrade request's body first, when it has one -- fed after a made-up head with only the
        request's framing headers, whose callbacks `_BodyOfUpgrade` drops."""
        framing, self._upgrade_framing = self._upgrade_framing, None
        if framing is None:
            self.parser = _request_parser(self)
        else:
            self.parser = _request_parser(_BodyOfUpgrade(self))
            self.parser.feed_data(framing)
        self._feed(rest)

    def _to_the_app(self, hold: bool) -> None:
        """uvicorn's scope, request cycle and ASGI task for the request whose head was just parsed
        (its task held back while `hold`, for on_message_complete to answer it if it can), its
        writes through a _HeadHolder."""
        url, headers, expect = self.url, self.headers, self.expect_100_continue
        HttpToolsProtocol.on_message_begin(self)  # the scope, as uvicorn makes it
        self.url, self.headers, self.expect_100_continue = url, headers, expect
        self.scope["headers"] = headers
        before = self.cycle
        self._parsing_head = hold
        try:
            HttpToolsProtocol.on_headers_complete(self)
        finally:
            self._parsing_head = False
        cycle = self.cycle
        if cycle is not before:  # a request to answer (not an upgrade): its writes go through a holder
            holder = _HeadHolder(cycle, self)
            cycle.transport, cycle.on_response = holder, holder.completed

    # --- answered in the protocol: see the module docstring ----------------------------
    def _start_asgi_task(self, cycle, app) -> None:
        if self._parsing_head and app is self.app:
            self._held = (cycle, app)  # on_message_complete or the end of data_received decides
        else:
            self._run(cycle, app)

    def on_body(self, body: bytes) -> None:
        if self._lane is None:
            super().on_body(body)
            return
        self._lane += body
        if len(self._lane) > HIGH_WATER_LIMIT:  # more than a prepared request's: the app reads it
            self._leave_lane(more_body=True)

    def on_message_complete(self) -> None:
        if self._lane is not None:
            if not self._answer_lane():
                self._leave_lane(more_body=False)
            return
        if self._upgrade_framing is not None:
            return  # llhttp ends an upgrade request at its head: its body is still to parse (_after_upgrade)
        super().on_message_complete()
        cycle = self.cycle
        cycle.waiting_for_100_continue = False  # the whole body is here: no interim 100 (see the module docstring)
        held = self._held
        if held is not None and held[0] is cycle:
            self._held = None
            if not self._answered(cycle.scope, bytes(cycle.body), cycle.keep_alive, cycle):
                self._run(*held)

    def data_received(self, data: bytes) -> None:
        """uvicorn's, except that nothing is parsed once the connection is finished or a rejection
        waits for its turn (what arrives then is dropped), and a request that begins after the
        connection's last response stops the parser silently."""
        if self._done or self._rejection is not None:
            self._drop(len(data))
            return
        self._unset_keepalive_if_required()
        self._feed(data)
        if self._lane is not None:  # its body is still on its way: the app reads it, under its deadline
            if self._done or self._rejection is not None or self.transport.is_closing():
                self._lane = None  # a malformed rest, or a request after the last response
            else:
                self._leave_lane(more_body=True)
        held = self._held
        if held is not None:
            self._held = None
            if not self._done and not self.transport.is_closing():
                self._run(*held)

    def _feed(self, data: bytes) -> None:
        """Parse what arrived; a malformed request is refused, an upgrade ignored."""
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade as upgrade:
            self._after_upgrade(data[upgrade.args[0]:])
        except httptools.HttpParserError as exc:
            if not isinstance(exc.__context__, _ConnectionDone):
                self.send_400_response(str(exc) or "invalid HTTP request")

    def _run(self, cycle, app) -> None:
        """Start a request's ASGI task (uvicorn's), noting it as the one whose answer is being made."""
        self._answering = cycle
        HttpToolsProtocol._start_asgi_task(self, cycle, app)

    def _answer_lane(self) -> bool:
        """Answer the complete request of the lane (head parsed, no cycle made) with `answer_now`,
        from a scope of what it reads: method, path, query string and headers."""
        path, query = _path_and_query(self.url)
        if path is None or "%" in path:
            return False  # the app says what is wrong with it; a percent-encoded path: uvicorn decodes it
        scope = {"type": "http", "method": self.parser.get_method().decode("ascii"), "path": self.root_path + path,
                 "query_string": query, "headers": self.headers}
        body, self._lane = self._lane, None
        if self._answered(scope, body, self.parser.should_keep_alive(), None):
            return True
        self._lane = body
        return False

    def _leave_lane(self, more_body: bool) -> None:
        """Hand the lane's request to the app, as uvicorn would have from its head on."""
        body, self._lane = self._lane, None
        self._to_the_app(hold=False)
        if body:
            HttpToolsProtocol.on_body(self, body)
        if not more_body:
            HttpToolsProtocol.on_message_complete(self)

    def _answered(self, scope, body: bytes, keep_alive: bool, cycle) -> bool:
        """Write the response `answer_now` gives for this complete request; False when it gives
        none. `cycle`, if the request has one, is marked complete."""
        if self._done or self.flow.write_paused or self.transport.is_closing():
            return False
        try:
            found = self._answer_now(scope, body)
        except Exception:  # noqa: BLE001 - the app answers it (and reports what went wrong)
            return False
        if found is None:
            return False
        head = b"".join((STATUS_200, _default_lines(self.server_state.default_headers), found.head_lines(),
                         b"" if keep_alive else b"connection: close\r\n", b"\r\n"))
        if cycle is not None:
            cycle.response_started = cycle.response_complete = True
            cycle.body = bytearray()
        self.transport.writelines((head, found.payload))
        if not keep_alive:
            self.finish()
        self.on_response_complete()
        return True

    # --- the client's half-close ----------------------------------------------------------
    def eof_received(self) -> bool | None:
        """The client has sent all it will (a half-close: `nc`, `curl --http1.0 -N`-style tools and
        some HTTP/1.0 clients do it after their request). uvicorn closes at once, dropping the
        answer of a request the app is still working on; here every request received whole gets
        its answer and the connection closes after the last one. One whose body was cut short
        cannot complete: the connection closes now, as does an idle one."""
        self._eof = True
        if self._done:
            return None  # lingering: the client has stopped sending, close now
        if self._rejection is not None:
            return True  # a refused request waits for the answers ahead of it; it closes after them
        self._drop_current()  # a request cut short: it will never be whole
        if not self._awaiting_responses():
            return None  # nothing pending: close
        last = self.pipeline[0][0] if self.pipeline else self._answering  # uvicorn queues at the left
        last.keep_alive = False  # its response closes the connection (uvicorn's cycle does it)
        return True  # keep the transport open for writing until then

    # --- keep-alive: one timer a connection, not one a request ---------------------------
    def _unset_keepalive_if_required(self) -> None:
        self._idle_since = None  # busy; uvicorn cancels and re-arms a timer a request instead

    def on_response_complete(self) -> None:
        self.server_state.total_requests += 1
        if self._done or self.transport.is_closing():
            return  # the pipelined requests after a closing response are not run
        self._idle_since = self.loop.time()
        self.flow.resume_reading()
        if self.pipeline:  # the next pipelined request
            cycle, app = self.pipeline.pop()
            self._start_asgi_task(cycle, app)
        elif self._rejection is not None:  # every response ahead of it is out: its turn
            self._write_rejection()
        elif self.timeout_keep_alive_task is None:
            self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive, self._keep_alive_due)

    def _keep_alive_due(self) -> None:
        """Close the connection once idle for timeout_keep_alive since its last response."""
        self.timeout_keep_alive_task = None
        since = self._idle_since
        if since is None or self.transport.is_closing():
            return  # busy: its response re-arms the timer
        left = since + self.timeout_keep_alive - self.loop.time()
        if left > 0:
            self.timeout_keep_alive_task = self.loop.call_later(left, self._keep_alive_due)
        else:
            self.transport.close()

    def _head_over(self) -> None:
        self._refusal = (431, "head_too_large", f"request line and headers are over the limit of "
                         f"{GUARDS.max_head_bytes} bytes", "headers", "head_too_large")
        raise _Refused

    def _head_timed_out(self) -> None:
        self._head_since = None
        if not self._done and not self.transport.is_closing():
            count_rejection("head_timeout")
            self._reject(408, "request_timeout",
                         f"request head not received within {GUARDS.header_timeout_s:g} s", None)

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a request the parser refuses: here the JSON error of `_refusal` (set
        by the callback that stopped the parser), else a 400 with llhttp's reason."""
        refusal, self._refusal = self._refusal, None
        if refusal is None:
            refusal = (400, "invalid_body", f"malformed HTTP request: {msg}", None, "bad_request")
        status, code, message, field, reason = refusal
        count_rejection(reason)
        self._reject(status, code, message, field)

    def _reject(self, status: int, code: str, message: str, field: str | None) -> None:
        """Answer a request the protocol refuses (its head or framing) and finish the connection,
        after the responses of the requests received before it: in request order."""
        if self._done:
            return
        request_id, _ = request_id_from(dict(self.headers).get(REQUEST_ID_HEADER))
        token = REQUEST_ID.set(request_id)
        try:
            body = error_body(code, message, field)
        finally:
            REQUEST_ID.reset(token)
        self._rejection = b"".join([
            STATUS_LINE[status], b"content-type: application/json\r\n", REQUEST_ID_HEADER, b": ",
            request_id.encode("ascii"), b"\r\ncontent-length: ", str(len(body)).encode(),
            b"\r\nconnection: close\r\n\r\n", body])
        self._drop_current()  # the malformed request itself, if its head was parsed
        if not self._awaiting_responses():
            self._write_rejection()

    def _drop_current(self) -> None:
        """Drop the request being parsed when the connection stops parsing (a rejection, the
        client's half-close): nothing more of it will come. In the lane it is forgotten; queued or
        held back, its task never runs; running (reading its body, nothing sent yet), it is told
        the client is gone, and answers nothing. A request whose message is complete is not this one."""
        self._lane = None
        cycle = self.cycle
        if cycle is None or not cycle.more_body or cycle.response_complete:
            return
        if self._held is not None and self._held[0] is cycle:
            self._held = None
        elif self.pipeline and self.pipeline[0][0] is cycle:
            self.pipeline.popleft()  # uvicorn queues at the left: the last parsed
        elif cycle is self._answering and not cycle.response_started:
            _disconnect(cycle)

    def _awaiting_responses(self) -> bool:
        """Whether a request received before the one being refused still has its answer to come:
        the running one (`self.cycle` is by then the last parsed, not it) or queued ones."""
        answering = self._answering
        return (answering is not None and not answering.response_complete and not answering.disconnected) \
            or bool(self.pipeline) or self._held is not None

    def _write_rejection(self) -> None:
        rejection, self._rejection = self._rejection, None
        if not self.transport.is_closing():
            self.transport.write(rejection)
            self.finish()

    # --- the end of a connection: once, lingering --------------------------------------------
    def finish(self) -> None:
        """End the connection after its last response: nothing more is parsed or run. The sending
        side is shut (the client reads the response, then EOF) and what the client still sends is
        read and dropped until it closes too, LINGER_BYTES have come or LINGER_S have passed.
        Closing at once with unread bytes in the socket would make the kernel send a reset, and a
        reset destroys the response the client has not read yet."""
        if self._done:
            return
        self._done = True
        transport = self.transport
        if transport.is_closing():
            return
        if self._eof or not transport.can_write_eof():
            transport.close()
            return
        transport.write_eof()
        self.flow.resume_reading()
        self._linger_timer = self.loop.call_later(LINGER_S, transport.close)

    def _drop(self, nbytes: int) -> None:
        """Bytes that arrived after the connection finished (or behind a rejection): dropped."""
        self._lingered += nbytes
        if self._lingered > LINGER_BYTES:
            self.transport.close()

    # --- the response: a client that stops reading -------------------------------------
    def pause_writing(self) -> None:
        super().pause_writing()
        if self._stall_deadline is None:
            self._stall_deadline = self.loop.call_later(GUARDS.write_stall_s, self._write_stalled)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._stall_deadline is not None:
            self._stall_deadline.cancel()
            self._stall_deadline = None

    def _write_stalled(self) -> None:
        self._stall_deadline = None
        count_rejection("write_stall")
        self._disconnect_all()  # before abort: a task blocked in send() wakes to a closed connection
        self.transport.abort()

    def _disconnect_all(self) -> None:
        """Tell every request of the connection still to be answered that the client is gone:
        its task's send() then returns without writing and receive() says http.disconnect."""
        for cycle in (self._answering, self.cycle, *(cycle for cycle, _ in self.pipeline)):
            if cycle is not None and not cycle.response_complete:
                _disconnect(cycle)

    def connection_lost(self, exc) -> None:
        self._head_since = None
        if self._linger_timer is not None:
            self._linger_timer.cancel()
            self._linger_timer = None
        if self.timeout_keep_alive_task is not None:
            self.timeout_keep_alive_task.cancel()
            self.timeout_keep_alive_task = None
        if self._stall_deadline is not None:
            self._stall_deadline.cancel()
            self._stall_deadline = None
        self._disconnect_all()
        super().connection_lost(exc)
