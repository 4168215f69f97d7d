"""PUT /v1/tables/{name} with the table itself as the body: a learned position table (GPT-2
`wpe`, OPT, BERT) whose values only a checkpoint holds.

Bodies: `application/x-npy` (a 2-D float .npy, position p + offset in row p + offset) or
`application/x-safetensors` (a safetensors file; `tensor=` picks the tensor when it holds
several). The other fields are query parameters: `tensor`, `offset`, `start`, `stop`,
`dtype`, `sha256` (the values must hash to it). Limits, auth and errors are the JSON form's:
the body is capped by max_body_bytes, the table by max_output_bytes; a malformed body is a
400, a rejected value (object/int dtype, NaN, bad shape, unknown tensor) a 422.
"""

from __future__ import annotations

from typing import Literal

from fastapi import Request
from pydantic import Field

from ... import checkpoint
from ...errors import PosencError
from ...tables import TableSpec
from .calls import _query, service_of, validate
from .codecs import NPY, decode_array
from .errors import HttpError
from .openapi import query_parameters, request_body
from .schemas import Integer, _Strict

SAFETENSORS = "application/x-safetensors"
UPLOAD_TYPES = (NPY, SAFETENSORS)
#: Parse, check (finite) and hash cost per body byte, to decide whether it leaves the event loop.
PARSE_NS_PER_BYTE = 2.0


class TableUploadQuery(_Strict):
    tensor: str | None = Field(None, description="safetensors body: the tensor (default: the file's only one; "
                               "a unique dotted suffix such as wpe.weight also matches).")
    offset: Integer | None = Field(None, description="Rows before position 0 (OPT: 2). Default 0.")
    start: Integer | None = Field(None, description="First position the table holds (default 0).")
    stop: Integer | None = Field(None, description="One past the last (default: every row after the offset).")
    dtype: Literal["float32", "float64"] | None = Field(
        None, description="Stored dtype; default float64 for a float64 tensor, else float32 (exact).")
    sha256: str | None = Field(None, description="If given, the tensor's SHA-256 (as stored) must equal it.")


async def uploaded_table(request: Request, media: str) -> TableSpec:
    """The learned TableSpec (rows attached) an upload describes."""
    params = validate(TableUploadQuery, _query(request, TableUploadQuery))
    body = await request.body()

    def parse() -> TableSpec:
        if media == NPY:
            if params.tensor is not None:
                raise PosencError("tensor", "applies to a safetensors body (a .npy holds one unnamed array)")
            name, values = None, checkpoint.check_values(decode_array(body, NPY, "body", None), "body")
        else:
            try:
                name, values = checkpoint.read_safetensors(body, params.tensor)
            except PosencError as exc:
                if exc.field != "body":
                    raise
                raise HttpError("invalid_body", exc.message, "body") from None
        table = checkpoint.learned_table(values, tensor=name, offset=params.offset, start=params.start,
                                         stop=params.stop, dtype=params.dtype)
        if params.sha256 is not None and params.sha256 != table.encoding.sha256:
            raise PosencError("sha256", f"the uploaded values hash to {table.encoding.sha256}, not {params.sha256}")
        return table

    return await service_of(request).run(parse, len(body) * PARSE_NS_PER_BYTE)


def table_request_body(model) -> dict:
    """openapi_extra of PUT /v1/tables/{name}: the JSON `model`, or an uploaded table plus its query fields."""
    extra = request_body(model)
    binary = {"schema": {"type": "string", "format": "binary"}}
    extra["requestBody"]["content"].update({media: binary for media in UPLOAD_TYPES})
    extra["parameters"] = query_parameters(TableUploadQuery)
    return extra
