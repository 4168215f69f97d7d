"""POST /v1/audit: diagnose a RoPE cos/sin cache (posenc.audit), or the RoPE llama.cpp computes from a
GGUF model file (posenc.audit.gguf), sent as a file.

Bodies, up to `limits.max_audit_body_bytes` (136 MiB by default: a 131072 x 128 float32 cos/sin pair
and room for the rest; every other route has `max_body_bytes`; a bigger body is a 413), read as they
stream in and charged to the worker's memory budget (503 when it is spent), as are the file parts a
multipart body is parsed into:
  * application/x-npy or application/octet-stream: one .npy, .npz, .safetensors or .gguf file (told
    apart by its magic bytes); `config` (JSON), `start`, `layer_type` in the query string;
  * multipart/form-data: a `file` part (or `cos` and `sin`, or `q` and `q_rot`), and optional
    `config` (a config.json file or text field), `start`, `layer_type` fields.
A GGUF model is gigabytes: its first bytes do (the metadata and the RoPE tensors, which
convert_hf_to_gguf.py writes before the weights); a RoPE tensor past the bytes sent is a 422 naming
the byte count that holds it. The answer is the audit report as JSON; bad files and parameters are
4xx with the usual body.
"""

from __future__ import annotations

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.datastructures import UploadFile

from ....errors import PosencError
from ..calls import service_of
from ..codecs import NPY, RAW, media_type
from ..errors import HttpError
from ..openapi import error_responses

router = APIRouter(prefix="/v1", tags=["audit"])
MULTIPART = "multipart/form-data"
#: Cost estimate that always sends the audit to a worker thread (it takes ~0.1-1 s).
AUDIT_COST_NS = 1e9
FILE_PARTS = (("file",), ("cos", "sin"), ("q", "q_rot"))
_BINARY = {"schema": {"type": "string", "format": "binary"}}
_FILE_PART_NAMES = [name for names in FILE_PARTS for name in names]
#: A form with one of FILE_PARTS' sets of file parts (no part of another set) and the optional fields.
_FORM = {"schema": {"type": "object", "properties": {
    **{name: {"type": "string", "format": "binary"} for name in _FILE_PART_NAMES}, "config": {"type": "string"},
    "start": {"type": "integer", "minimum": 0}, "layer_type": {"type": "string"}},
    "oneOf": [{"required": list(names), "properties": {other: False for other in _FILE_PART_NAMES
                                                       if other not in names}} for names in FILE_PARTS]}}


def _config(text) -> dict | None:
    if text is None or text == "":
        return None
    if isinstance(text, (bytes, bytearray)):
        text = text.decode("utf-8", "replace")
    try:
        doc = orjson.loads(text) if isinstance(text, str) else text
    except orjson.JSONDecodeError as exc:
        raise PosencError("config", f"is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise PosencError("config", "must be a JSON object (a config.json)")
    return doc


def _start(value) -> int:
    if value is None or value == "":
        return 0
    try:
        start = int(value)
    except (TypeError, ValueError):
        raise PosencError("start", f"must be a non-negative integer, got {value!r}") from None
    if start < 0:
        raise PosencError("start", f"must be a non-negative integer, got {start}")
    return start


def _source(data, field: str = "file"):
    """A GGUF file's bytes as they are (audit_gguf reads only what it needs), any other file's named arrays."""
    from ....audit import read_arrays
    from ....audit.gguf_file import MAGIC

    return data if bytes(data[:4]) == MAGIC else read_arrays(data, field)


def _audit(source, config: dict | None, start: int, layer_type: str | None) -> dict:
    from ....audit import audit_arrays
    from ....audit.gguf import audit_gguf

    if isinstance(source, dict):
        return audit_arrays(source, config, start=start, layer_type=layer_type)
    if start:
        raise PosencError("start", f"is for a cos/sin cache; a GGUF file is judged from position 0, got {start}")
    return audit_gguf(source, config, layer_type=layer_type)


async def _from_form(request: Request, max_bytes: int, held):
    """(source, config, start, layer_type) of a multipart body (source: named arrays, or a GGUF file's bytes);
    the file parts' bytes are charged to `held` (a budget Reservation) while the audit runs."""
    from starlette.formparsers import MultiPartException  # imported on use: workers start faster

    from ....audit import read_arrays

    try:
        form = await request.form(max_files=3, max_fields=8, max_part_size=max_bytes)
    except MultiPartException as exc:
        raise HttpError("invalid_body", f"multipart body: {exc.message}", "body") from None
    source = {}
    for names in FILE_PARTS:
        if all(isinstance(form.get(n), UploadFile) for n in names):
            for name in names:
                data = await form[name].read()
                held.grow(len(data), "the audited file")
                found = _source(data) if name == "file" else read_arrays(data, name)
                if name == "file":
                    source = found
                elif len(found) != 1:
                    raise PosencError(name, f"must hold one array, holds {sorted(found)}")
                else:
                    source[name] = next(iter(found.values()))
            break
    else:
        raise PosencError("file", "send a `file` part (or `cos` and `sin`, or `q` and `q_rot`)")
    config = form.get("config")
    if isinstance(config, UploadFile):
        config = await config.read()
    return source, _config(config), _start(form.get("start")), form.get("layer_type") or None


@router.post("/audit", summary="Diagnose a RoPE cos/sin cache (or q before/after rotation, or a GGUF model)",
             responses={200: {"description": "The audit report"}, **error_responses(400, 413, 415, 422, 429)},
             openapi_extra={"requestBody": {"required": True, "content": {NPY: _BINARY, RAW: _BINARY,
                                                                          MULTIPART: _FORM}},
                            "parameters": [{"name": "config", "in": "query", "required": False,
                                            "content": {"application/json": {"schema": {"type": "object"}}}},
                                           {"name": "start", "in": "query", "required": False,
                                            "schema": {"type": "integer", "minimum": 0}},
                                           {"name": "layer_type", "in": "query", "required": False,
                                            "schema": {"type": "string"}}]})
async def audit(request: Request) -> Response:
    service = service_of(request)
    content = media_type(request.headers.get("content-type"))
    held = service.budget.take(0, "the audited file")
    try:
        if content == MULTIPART:
            source, config, start, layer_type = await _from_form(request, service.config.limits.max_audit_body_bytes,
                                                                 held)
        elif content in (NPY, RAW):
            query = request.query_params
            source = _source(await request.body())  # views of the body: nothing copied
            config, start, layer_type = _config(query.get("config")), _start(query.get("start")), \
                query.get("layer_type")
        else:
            raise HttpError("unsupported_media_type", f"Content-Type {content!r}: send {NPY}, {RAW} or {MULTIPART}",
                            "content-type")
        report = await service.run(lambda: _audit(source, config, start, layer_type), AUDIT_COST_NS)
    finally:
        held.release()
    return Response(orjson.dumps(report), media_type="application/json")
