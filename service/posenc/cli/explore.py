"""`posenc explore`: open the explorer page of a running service (or start one and open it).

urllib.request (with http.client, email and ssl), webbrowser and subprocess are imported when
the command runs: at the top of this module they would be most of what every `posenc --help`
imports.
"""

from __future__ import annotations

import sys
import time


def register(sub) -> None:
    p = sub.add_parser("explore", help="open the explorer page (/explore) of the service in a browser")
    p.add_argument("--url", default="http://127.0.0.1:8000", help="the service (default http://127.0.0.1:8000)")
    p.add_argument("--serve", action="store_true", help="start `posenc serve` first when nothing answers there")
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


def run(args) -> int:
    import subprocess
    import webbrowser

    url = args.url.rstrip("/")
    server = None
    if not answers(url) and args.serve:
        server = subprocess.Popen([sys.executable, "-m", "posenc.cli", "serve"])
        deadline = time.monotonic() + 60
        while not answers(url) and time.monotonic() < deadline and server.poll() is None:
            time.sleep(0.5)
    if not answers(url):
        print(f"posenc explore: nothing answers at {url} (start it with `posenc serve`, or pass --serve)",
              file=sys.stderr)
        return 1
    page = f"{url}/explore"
    print(page)
    if not args.no_browser:
        webbrowser.open(page)
    if server is not None:
        try:
            server.wait()
        except KeyboardInterrupt:
            server.terminate()
            server.wait()
    return 0
