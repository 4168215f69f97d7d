"""The explorer page's assets (HTML, script, style, and the vendored Vega, Vega-Lite and vega-embed
that draw its interactive figures), shipped as package data and served by the service at /explore:
no CDN, no external font, nothing fetched from anywhere but the service."""

from __future__ import annotations

from importlib import resources

_JS, _CSS = "text/javascript; charset=utf-8", "text/css; charset=utf-8"
#: served name -> (media type, path in this package) of every asset the page may load (nothing else is served).
ASSETS = {"explore.html": ("text/html; charset=utf-8", "explore.html"), "explore.js": (_JS, "explore.js"),
          "explore.css": (_CSS, "explore.css"), "vega.min.js": (_JS, "vendor/vega.min.js"),
          "vega-lite.min.js": (_JS, "vendor/vega-lite.min.js"), "vega-embed.min.js": (_JS, "vendor/vega-embed.min.js")}
#: The page may talk to, load from and embed only the service itself; figures are drawn on canvases by Vega with
#: its expression interpreter (no eval), exports are blob:/data: downloads.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


def media_type(name: str) -> str:
    return ASSETS[name][0]


def asset(name: str) -> bytes:
    return resources.files(__name__).joinpath(ASSETS[name][1]).read_bytes()
