"""`posenc explore`: open the explorer page of a running service (or start one and open it).

With --serve and nothing answering at --url, `posenc serve` is started at --url's host and port,
without the binary-protocol sidecar (the page does not use it; --binary-port asks for one), and
stopped when this command ends. A start that fails (the port taken by something that is not the
service, the service exiting, or not answering in time) is an error naming the address, and
leaves no process behind: the service runs in its own process group, which is ended whole.

urllib.request (with http.client, email and ssl), webbrowser and subprocess are imported when
the command runs: at the top of this module they would be most of what every `posenc --help`
imports.
"""

from __future__ import annotations

import sys
import time

DEFAULT_URL = "http://127.0.0.1:8000"
#: How long a started service may take to answer: its first start on a machine compiles the kernels
#: (73 s on the shared 2-vCPU test machine; 5 s with the compiled cache).
START_TIMEOUT_S = 300.0
#: How long a started service may take to drain when stopped, before its process group is killed.
STOP_TIMEOUT_S = 30.0


class ServiceNotStarted(Exception):
    """--serve could not start the service; the message names the address and why."""


def register(sub) -> None:
    p = sub.add_parser("explore", help="open the explorer page (/explore) of the service in a browser")
    p.add_argument("--url", default=DEFAULT_URL, help=f"the service (default {DEFAULT_URL}); with --serve, "
                   "the host and port the started service listens on")
    p.add_argument("--serve", action="store_true", help="start `posenc serve` at --url's host and port first when "
                   "nothing answers there (stopped when this command ends)")
    p.add_argument("--binary-port", type=int, default=0, help="with --serve: the started service's binary-protocol "
                   "TCP port (default 0: no binary sidecar; the page does not use it)")
    p.add_argument("--no-browser", action="store_true", help="print the address only")
    p.set_defaults(handler=run)


def answers(url: str) -> bool:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=1.0) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def listen_address(url: str) -> tuple[str, int]:
    """The host and port `posenc serve` must listen on to answer at `url`."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        raise ServiceNotStarted(f"--url {url} has no valid port") from None
    if parts.scheme != "http" or not parts.hostname:
        raise ServiceNotStarted(f"--serve starts a plain-HTTP service: give --url as http://HOST:PORT, not {url}")
    return parts.hostname, 80 if port is None else port


def _check_free(host: str, port: int) -> None:
    """Bind the address as uvicorn will (IPv6 for an IPv6 literal, else IPv4; SO_REUSEADDR): a listener
    already there, or an address that is not this machine's, is named before anything is started."""
    import errno
    import socket

    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as exc:
        why = {errno.EADDRINUSE: f"port {port} is taken by something that does not answer /healthz",
               errno.EADDRNOTAVAIL: f"{host} is not an address of this machine"}.get(exc.errno, "")
        raise ServiceNotStarted(f"cannot start the service at {host}:{port}: {exc.strerror or exc}"
                                f"{f' ({why})' if why else ''}; pick another --url") from None


def stop(server) -> None:
    """SIGTERM to the service's process group (it drains and removes its tables), then SIGKILL to whatever of
    the group outlived its leader or STOP_TIMEOUT_S: nothing it started is left."""
    import os
    import signal
    import subprocess

    try:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=STOP_TIMEOUT_S)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    try:
        os.killpg(server.pid, signal.SIGKILL)
    except ProcessLookupError:  # the group is gone: every process in it has exited
        pass
    server.wait()


def start_service(url: str, binary_port: int = 0, timeout_s: float = START_TIMEOUT_S):
    """`posenc serve` at `url`'s host and port in a process group of its own, once it answers; a
    ServiceNotStarted, with the process group ended, when it does not."""
    import subprocess

    host, port = listen_address(url)
    _check_free(host, port)
    print(f"posenc explore: starting posenc serve at {host}:{port} (a first start compiles the kernels, a minute "
          "or more)", file=sys.stderr)
    server = subprocess.Popen([sys.executable, "-m", "posenc.cli", "serve", "--host", host, "--port", str(port),
                               "--binary-port", str(binary_port)], start_new_session=True)
    try:
        deadline = time.monotonic() + timeout_s
        while not answers(url):
            if server.poll() is not None:
                raise ServiceNotStarted(f"posenc serve at {host}:{port} exited with status {server.returncode} "
                                        "before it answered (its log is above)")
            if time.monotonic() > deadline:
                raise ServiceNotStarted(f"posenc serve at {host}:{port} did not answer {url}/healthz within "
                                        f"{timeout_s:g} s; stopped it")
            time.sleep(0.5)
    except BaseException:  # not started, or Ctrl-C while starting: nothing may be left running
        stop(server)
        raise
    return server


def run(args) -> int:
    import signal
    import webbrowser

    url = args.url.rstrip("/")
    server = None
    # The service runs in its own process group, so a terminal's Ctrl-C or hangup reaches it only through
    # this process: SIGINT, SIGHUP and SIGTERM end this command (KeyboardInterrupt), which stops the service.
    handlers = {sig: signal.signal(sig, signal.default_int_handler) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        if not answers(url) and args.serve:
            try:
                server = start_service(url, args.binary_port)
            except ServiceNotStarted as exc:
                print(f"posenc explore: {exc}", file=sys.stderr)
                return 1
        if not answers(url):
            print(f"posenc explore: nothing answers at {url} (start it with `posenc serve`, or pass --serve)",
                  file=sys.stderr)
            return 1
        page = f"{url}/explore"
        print(page, flush=True)
        if not args.no_browser:
            webbrowser.open(page)
        return server.wait() if server is not None else 0
    except KeyboardInterrupt:
        return 130
    finally:
        if server is not None:
            stop(server)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
