"""The HTTP bench's cases and its bare ASGI app, shared by `bench/http.py` (wrk) and
`bench/http_inprocess.py` (in-process): each imports this module, neither the other.

A case is one request as wrk sends it (method, path, headers, body). The bare app answers a
request carrying X-Bench-Case with the bytes and headers posenc answered that case with (its
PAYLOADS, filled by whichever bench runs it), so the ratio of the two is posenc's own cost.
"""

from __future__ import annotations

import json
import os
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..http.api.codecs import JSON, RAW

TABLE_ROWS = 131072
ROW_POSITION = 12345
COMPUTED_POSITION = 1_700_000_000_123
BATCH = 1024
PAYLOAD_ENV = "POSENC_BARE_PAYLOADS"
CASE_HEADER = "X-Bench-Case"
_SPEC_QUERY = "spec=" + urllib.parse.quote('{"dim":128}')


@dataclass(frozen=True)
class Case:
    label: str
    method: str
    path: str
    accept: str | None = None
    body: bytes = b""
    content_type: str | None = None
    encodings: int = 1  # rows answered per request


def _positions(n: int) -> list[int]:
    return [int(p) for p in np.random.default_rng(n).integers(0, TABLE_ROWS, n)]


def _spec_json(n: int) -> bytes:
    return json.dumps({"spec": {"dim": 128}, "positions": _positions(n)}).encode()


def _int64(positions: list[int]) -> bytes:
    return np.asarray(positions, "<i8").tobytes()


_ROW = f"/v1/tables/sin128/rows/{ROW_POSITION}"
#: A millisecond timestamp's row of the embedded config's named computed encoding (sin128's spec).
_COMPUTED_ROW = f"/v1/tables/sin128-any/rows/{COMPUTED_POSITION}"
CASES = {
    "row-binary": Case("1 row, octet-stream (512 B)", "GET", _ROW, RAW),
    "computed-row-binary": Case("1 computed row (`sin128-any`, a timestamp), octet-stream", "GET", _COMPUTED_ROW,
                                RAW),
    "computed-row-json": Case("1 computed row (`sin128-any`, a timestamp), JSON", "GET", _COMPUTED_ROW),
    "row-binary-float16": Case("1 row, octet-stream, `?dtype=float16` (cast once from float64 values)", "GET",
                               _ROW + "?dtype=float16", RAW),
    "row-json": Case("1 row, JSON", "GET", _ROW),
    "batch": Case(f"{BATCH} rows, int64 in / float32 out (512 KiB)", "POST", "/v1/tables/sin128/rows", RAW,
                  _int64(_positions(BATCH)), RAW, BATCH),
    "spec1-json": Case("spec, 1 position, JSON in / out", "POST", "/v1/sinusoidal", None, _spec_json(1), JSON),
    "spec1-binary": Case("spec, 1 position, int64 in / float32 out", "POST", f"/v1/sinusoidal?{_SPEC_QUERY}", RAW,
                         _int64(_positions(1)), RAW),
    "spec64-json": Case("spec, 64 positions, JSON in / out", "POST", "/v1/sinusoidal", None, _spec_json(64), JSON,
                        64),
    "spec64-binary": Case("spec, 64 positions, int64 in / float32 out (32 KiB)", "POST",
                          f"/v1/sinusoidal?{_SPEC_QUERY}", RAW, _int64(_positions(64)), RAW, 64),
    "rope1-json": Case("RoPE cos/sin computed, 1 position, JSON", "POST", "/v1/rope/cos_sin", None,
                       json.dumps({"spec": {"head_dim": 128}, "positions": [ROW_POSITION]}).encode(), JSON),
}


# --- the bare ASGI app: the ceiling ---------------------------------------------------------------
#: Case name -> (body, headers) the bare app answers with: what posenc answered that case with.
PAYLOADS: dict[bytes, tuple[bytes, list[tuple[bytes, bytes]]]] = {}


def _load_payloads() -> None:
    directory = Path(os.environ[PAYLOAD_ENV])
    for name in CASES:
        meta = json.loads((directory / f"{name}.json").read_text())
        headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in meta["headers"]]
        PAYLOADS[name.encode()] = ((directory / f"{name}.body").read_bytes(), headers)


async def bare_app(scope, receive, send):
    """Drain the request, answer the bytes and headers posenc answered this case with, nothing else."""
    if scope["type"] != "http":
        message = await receive()
        if message["type"] == "lifespan.startup":
            _load_payloads()
            await send({"type": "lifespan.startup.complete"})
            await receive()
        await send({"type": "lifespan.shutdown.complete"})
        return
    more = True
    while more:
        more = (await receive()).get("more_body", False)
    case = next((v for k, v in scope["headers"] if k == CASE_HEADER.lower().encode()), b"row-binary")
    body, headers = PAYLOADS.get(case, PAYLOADS[b"row-binary"])
    await send({"type": "http.response.start", "status": 200,
                "headers": [*headers, (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def request_headers(name: str, case: Case) -> dict[str, str]:
    headers = {CASE_HEADER: name}
    if case.accept:
        headers["Accept"] = case.accept
    if case.content_type:
        headers["Content-Type"] = case.content_type
    return headers


def service_config(shm_dir: str) -> str:
    return (f'[server]\nworkers = 1\nbinary_port = 0\nshm_dir = "{shm_dir}"\n\n[limits]\nmax_concurrency = 4096\n\n'
            f'[[tables]]\nname = "sin128"\nencoding = {{ kind = "sinusoidal", dim = 128 }}\n'
            f'start = 0\nstop = {TABLE_ROWS}\ndtype = "float32"\n\n'
            f'[[tables]]\nname = "sin128-any"\ncomputed = true\nencoding = {{ kind = "sinusoidal", dim = 128 }}\n')
