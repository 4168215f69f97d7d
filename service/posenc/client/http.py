"""HTTP client of the posenc service: sync and asyncio, keep-alive, binary on the wire, numpy out.

    >>> from posenc.client import HttpClient
    >>> with HttpClient("http://127.0.0.1:8000") as c:
    ...     row = c.row("sin128", 4096)                               # the hot GET route
    ...     rows = c.rows("llama3.1-8b", [0, 1, 131071])              # a batch from a shared-memory table
    ...     pe = c.sinusoidal([0.5, 7], {"dim": 64})                  # computed from a spec
    ...     cos, sin = c.rope_cos_sin(range(8), hf_config=config)     # a model's config.json

Positions travel as raw little-endian int64 (float64 when fractional) and arrays come back as
raw bytes (`Accept: application/octet-stream`, dtype and shape in the X-Posenc-* headers), read
into numpy without a copy (read-only arrays). Requests with an `hf_config` go as JSON bodies.
A 4xx/5xx raises `HttpError`, a `PosencError` with the server's `code`, `field` and `status`.
A service that cannot be reached (nothing listening, a timeout, a dropped connection) raises
`ServiceUnreachable`, a `PosencError` naming the address, never a bare httpx exception.
"""

from __future__ import annotations

import io
import json
from typing import Any

import httpx
import ml_dtypes
import numpy as np

from ..errors import PosencError

RAW = "application/octet-stream"
NPY = "application/x-npy"
_DTYPES = {"float32": np.float32, "float64": np.float64, "float16": np.float16,
           "bfloat16": ml_dtypes.bfloat16, "int64": np.int64, "int32": np.int32}


class HttpError(PosencError):
    """The service refused a request: `status` (HTTP), `code` and `field` as its error body says."""

    def __init__(self, status: int, code: str, field: str | None, message: str):
        super().__init__(field or "request", message)
        self.status, self.code = status, code


class ServiceUnreachable(PosencError):
    """No answer from the service at `url` (field "base_url"): the connection was refused or
    timed out, or the transport failed mid-request. `cause` is the httpx exception."""

    def __init__(self, url: str, cause: httpx.TransportError):
        what = "cannot connect" if isinstance(cause, httpx.ConnectError | httpx.ConnectTimeout) else "no answer"
        super().__init__("base_url", f"{what} to the posenc service at {url} ({type(cause).__name__}: {cause}); "
                         "is `posenc serve` running and listening there?")
        self.url, self.cause = url, cause


def _headers(api_key: str | None) -> dict[str, str]:
    headers = {"accept": RAW}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    return headers


def _spec_dict(spec) -> dict | None:
    if spec is None or isinstance(spec, dict):
        return spec
    to_dict = getattr(spec, "to_dict", None)
    if to_dict is None:
        raise PosencError("spec", f"must be a spec or a dict, got {type(spec).__name__}")
    return {k: v for k, v in to_dict().items() if k != "kind"}


def _positions_body(positions) -> tuple[bytes, dict]:
    arr = np.asarray(positions)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.dtype.kind in "iub":
        return np.ascontiguousarray(arr, dtype="<i8").tobytes(), {}
    if arr.dtype.kind != "f":
        raise PosencError("positions", f"must be numbers, got dtype {arr.dtype}")
    exact = np.ascontiguousarray(arr, dtype="<f8")
    if np.all(np.isfinite(exact)) and np.all(exact == np.round(exact)) and np.all(np.abs(exact) < 2**62):
        return exact.astype("<i8").tobytes(), {}
    return exact.tobytes(), {"positions_dtype": "float64"}


def _query(params: dict) -> dict:
    """Query parameters: objects as JSON (the service reads values starting with { or [ as JSON)."""
    out = {}
    for key, value in params.items():
        if value is None:
            continue
        if isinstance(value, (dict, list, tuple)):
            out[key] = json.dumps(value, separators=(",", ":"))
        elif isinstance(value, bool):
            out[key] = "true" if value else "false"
        else:
            out[key] = str(value)
    return out


def _decode(response: httpx.Response) -> Any:
    if response.status_code >= 400:
        raise _error(response)
    media = response.headers.get("content-type", "").split(";")[0].strip()
    if media == RAW:
        dtype = _DTYPES.get(response.headers.get("x-posenc-dtype", ""))
        if dtype is None:
            raise HttpError(response.status_code, "bad_response", "x-posenc-dtype",
                            f"unknown dtype {response.headers.get('x-posenc-dtype')!r}")
        shape_text = response.headers.get("x-posenc-shape", "")
        shape = tuple(int(n) for n in shape_text.split(",")) if shape_text else ()
        return np.frombuffer(response.content, dtype=dtype).reshape(shape)
    if media == NPY:
        return np.load(io.BytesIO(response.content), allow_pickle=False)
    return response.json()


def _error(response: httpx.Response) -> HttpError:
    """The HttpError of a refused request, from its {"error": {code, message, field}} body."""
    try:
        err = response.json()["error"]
        code, field, message = str(err["code"]), err.get("field"), str(err["message"])
    except (ValueError, KeyError, TypeError):
        return HttpError(response.status_code, "http_error", None,
                         f"HTTP {response.status_code}: {response.text[:200]}")
    if field and message.startswith(f"{field}: "):
        message = message[len(field) + 2:]
    return HttpError(response.status_code, code, field, message)


def _split_cos_sin(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    half = rows.shape[-1] // 2
    return rows[..., :half], rows[..., half:]


class _Requests:
    """What each call sends: (method, path, query, body, headers). Shared by both clients."""

    @staticmethod
    def row(name: str, position: int):
        return "GET", f"/v1/tables/{name}/rows/{int(position)}", {}, None, {}

    @staticmethod
    def rows(name: str, positions, dtype=None):
        body, extra = _positions_body(positions)
        return "POST", f"/v1/tables/{name}/rows", {**extra, "dtype": dtype}, body, {"content-type": RAW}

    @staticmethod
    def computed(path: str, positions, fields: dict):
        """A positions request: binary body, fields in the query; JSON when it carries an hf_config."""
        if fields.get("hf_config") is not None:
            doc = {"positions": np.asarray(positions, dtype=np.float64).reshape(-1).tolist(), **fields}
            return "POST", path, {}, json.dumps({k: v for k, v in doc.items() if v is not None}).encode(), \
                {"content-type": "application/json"}
        body, extra = _positions_body(positions)
        return "POST", path, {**extra, **fields}, body, {"content-type": RAW}

    @staticmethod
    def json_call(path: str, fields: dict):
        doc = {k: v for k, v in fields.items() if v is not None}
        return "POST", path, {}, json.dumps(doc).encode(), {"content-type": "application/json"}

    @staticmethod
    def audit(arrays, config: dict | None, start: int | None, layer_type: str | None):
        """One file in the body: bytes as given (.npy, .npz or .safetensors), or a dict of named
        arrays ("cos"/"sin", "q"/"q_rot", or one cache) as an .npz; the rest in the query."""
        if isinstance(arrays, (bytes, bytearray, memoryview)):
            body = bytes(arrays)
        elif isinstance(arrays, dict):
            buffer = io.BytesIO()
            np.savez(buffer, **{name: np.asarray(array) for name, array in arrays.items()})
            body = buffer.getvalue()
        else:
            raise PosencError("arrays", "must be a dict of named arrays or a file's bytes, got "
                              f"{type(arrays).__name__}")
        query = {"config": config, "start": start, "layer_type": layer_type}
        return "POST", "/v1/audit", query, body, {"content-type": RAW, "accept": "application/json"}

    @staticmethod
    def apply(x, fields: dict):
        buffer = io.BytesIO()
        np.save(buffer, np.ascontiguousarray(x), allow_pickle=False)
        return "POST", "/v1/rope/apply", fields, buffer.getvalue(), {"content-type": NPY, "accept": NPY}


def _sinusoidal(positions, spec, table, dtype):
    return _Requests.computed("/v1/sinusoidal", positions, {"spec": _spec_dict(spec), "table": table, "dtype": dtype})


def _cos_sin(positions, spec, hf_config, table, layer_type, layer, seq_len, dtype, arrangement):
    """None for `arrangement` sends none: the server's default ("freq"), and the prepared fast path.
    `layer` (an index) or `layer_type` picks one of an `hf_config`'s encodings."""
    return _Requests.computed("/v1/rope/cos_sin", positions, {
        "spec": _spec_dict(spec), "hf_config": hf_config, "table": table, "layer_type": layer_type,
        "layer": layer, "seq_len": seq_len, "dtype": dtype, "arrangement": arrangement})


class HttpClient:
    """A keep-alive connection pool to one posenc HTTP service (httpx.Client underneath)."""

    def __init__(self, base_url: str = "http://127.0.0.1:8000", *, api_key: str | None = None,
                 timeout: float = 30.0, transport: httpx.BaseTransport | None = None):
        self._http = httpx.Client(base_url=base_url, headers=_headers(api_key), timeout=timeout, transport=transport)

    def _request(self, method, path, query, body, headers) -> httpx.Response:
        try:
            return self._http.request(method, path, params=_query(query), content=body, headers=headers)
        except httpx.TransportError as exc:
            raise ServiceUnreachable(str(self._http.base_url), exc) from exc

    def _send(self, method, path, query, body, headers):
        return _decode(self._request(method, path, query, body, headers))

    def row(self, table: str, position: int) -> np.ndarray:
        return self._send(*_Requests.row(table, position))

    def rows(self, table: str, positions, *, dtype: str | None = None) -> np.ndarray:
        return self._send(*_Requests.rows(table, positions, dtype))

    def sinusoidal(self, positions, spec=None, *, table: str | None = None, dtype: str = "float32") -> np.ndarray:
        return self._send(*_sinusoidal(positions, spec, table, dtype))

    def rope_cos_sin(self, positions, spec=None, *, hf_config: dict | None = None, table: str | None = None,
                     layer_type: str | None = None, layer: int | None = None, seq_len: float | None = None,
                     dtype: str = "float32", arrangement: str | None = None):
        """(cos, sin) as posenc.rope_cos_sin gives them, `arrangement` included ("cat": transformers');
        with `hf_config`, `layer=i` (or `layer_type=`) picks the encoding layer i uses."""
        return _split_cos_sin(self._send(*_cos_sin(positions, spec, hf_config, table, layer_type, layer, seq_len,
                                                   dtype, arrangement)))

    def rope_apply(self, x, spec=None, *, positions=None, offset: int | None = None, table: str | None = None,
                   layout: str | None = None, seq_len: float | None = None) -> np.ndarray:
        fields = {"spec": _spec_dict(spec), "table": table, "offset": offset, "layout": layout, "seq_len": seq_len,
                  "positions": None if positions is None else np.asarray(positions, dtype=np.float64).tolist()}
        return self._send(*_Requests.apply(x, fields))

    def rope_inv_freq(self, spec=None, *, hf_config=None, table=None, seq_len=None) -> tuple[np.ndarray, float]:
        response = self._request(*_Requests.json_call("/v1/rope/inv_freq", {
            "spec": _spec_dict(spec), "hf_config": hf_config, "table": table, "seq_len": seq_len}))
        inv = _decode(response)  # float64 [n_freq]; the factor travels in a header with binary responses
        return inv, float(response.headers["x-posenc-attention-factor"])

    def alibi_slopes(self, n_heads: int, **fields) -> np.ndarray:
        return self._send(*_Requests.json_call("/v1/alibi/slopes", {"n_heads": n_heads, **fields}))

    def alibi_bias(self, n_heads: int, q_len: int, k_len: int | None = None, **fields) -> np.ndarray:
        return self._send(*_Requests.json_call("/v1/alibi/bias",
                                               {"n_heads": n_heads, "q_len": q_len, "k_len": k_len, **fields}))

    def t5_buckets(self, relative_position, **fields) -> np.ndarray:
        rel = np.asarray(relative_position).tolist()
        return self._send(*_Requests.json_call("/v1/t5/buckets", {"relative_position": rel, **fields}))

    def tables(self) -> list[dict]:
        return self._send("GET", "/v1/tables", {}, None, {"accept": "application/json"})["tables"]

    def model_positions(self, hf_config: dict, *, layer: int | None = None) -> dict:
        """POST /v1/models/positions: every position encoding the model of a config.json uses,
        by layer type ({"model_type", "reader", "layer_types": {name: {kind, spec, layers, apply, notes}}});
        with `layer=i`, only the one layer i uses."""
        method, path, query, body, headers = _Requests.json_call("/v1/models/positions",
                                                                 {"hf_config": hf_config, "layer": layer})
        return self._send(method, path, query, body, {**headers, "accept": "application/json"})

    def audit(self, arrays, *, config: dict | None = None, start: int | None = None,
              layer_type: str | None = None) -> dict:
        """POST /v1/audit: the report (a dict) on a RoPE cos/sin cache, or q before and after
        rotation. `arrays`: {"cos": ..., "sin": ...} (or {"q": ..., "q_rot": ...}, or one cache
        array) sent as an .npz, or a .npy/.npz/.safetensors file's bytes; `config` the model's
        config.json to check against, `start` the position of the first row."""
        return self._send(*_Requests.audit(arrays, config, start, layer_type))

    def info(self) -> dict:
        """GET /info: versions, kernel path, limits, timeouts and READY tables of the instance."""
        return self._send("GET", "/info", {}, None, {"accept": "application/json"})

    def close(self) -> None:
        self._http.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class AsyncHttpClient:
    """The same calls as HttpClient, as coroutines (httpx.AsyncClient underneath)."""

    def __init__(self, base_url: str = "http://127.0.0.1:8000", *, api_key: str | None = None,
                 timeout: float = 30.0, transport: httpx.AsyncBaseTransport | None = None):
        self._http = httpx.AsyncClient(base_url=base_url, headers=_headers(api_key), timeout=timeout,
                                       transport=transport)

    async def _send(self, method, path, query, body, headers):
        try:
            response = await self._http.request(method, path, params=_query(query), content=body, headers=headers)
        except httpx.TransportError as exc:
            raise ServiceUnreachable(str(self._http.base_url), exc) from exc
        return _decode(response)

    async def row(self, table: str, position: int) -> np.ndarray:
        return await self._send(*_Requests.row(table, position))

    async def rows(self, table: str, positions, *, dtype: str | None = None) -> np.ndarray:
        return await self._send(*_Requests.rows(table, positions, dtype))

    async def sinusoidal(self, positions, spec=None, *, table=None, dtype="float32") -> np.ndarray:
        return await self._send(*_sinusoidal(positions, spec, table, dtype))

    async def rope_cos_sin(self, positions, spec=None, *, hf_config=None, table=None, layer_type=None, layer=None,
                           seq_len=None, dtype="float32", arrangement=None):
        rows = await self._send(*_cos_sin(positions, spec, hf_config, table, layer_type, layer, seq_len, dtype,
                                          arrangement))
        return _split_cos_sin(rows)

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()
