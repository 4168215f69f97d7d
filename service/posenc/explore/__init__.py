"""The explorer page's assets (HTML, script, style), shipped as package data and served by the
service at /explore: no CDN, no external font, nothing fetched from anywhere but the service."""

from __future__ import annotations

from importlib import resources

#: name -> media type of every asset the page may load (nothing else is served).
ASSETS = {"explore.html": "text/html; charset=utf-8", "explore.js": "text/javascript; charset=utf-8",
          "explore.css": "text/css; charset=utf-8"}
#: The page may talk to, load from and embed only the service itself (SVG figures arrive as data: URLs).
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


def asset(name: str) -> bytes:
    return resources.files(__name__).joinpath(name).read_bytes()
