"""Rows of a named shared-memory table: batches by POST, single rows by GET.

GET /v1/tables/{name}/rows/{position} is normally answered by the raw-ASGI fast path
(`http.fastpath`) before FastAPI; the route here documents it and answers what the fast
path passes on (other queries, negative positions, errors), with the same encoder.
"""

from __future__ import annotations

from typing import Annotated

import numpy as np
from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response

from ....api.rope import arrange_rows
from ....dtypes import output_dtype
from ....encodings.rope import ARRANGEMENTS
from ....errors import PosencError
from ....shm import Table
from ..calls import read_call, respond, service_of
from ..codecs import negotiate
from ..errors import HttpError
from ..openapi import array_responses, request_body
from ..schemas import TABLE_NAME_PATTERN, Dtype, RowsRequest

router = APIRouter(prefix="/v1/tables", tags=["tables"])
_NAME = Path(description="Table name (GET /v1/tables).", examples=["sin128"], min_length=1, max_length=64,
             pattern=TABLE_NAME_PATTERN)
#: A position as the path may spell it: an optional minus and 1..19 digits (no "+5", no 5000 digits).
POSITION_PATTERN = r"^-?[0-9]{1,19}$"


async def named_table(request: Request, name: str, kind: str | None = None) -> Table:
    table = await service_of(request).table(name)
    if kind is not None and table.spec.kind != kind:
        raise PosencError("table", f"table {name!r} holds {table.spec.kind} encodings, not {kind}")
    return table


def dtype_for(table: Table, dtype) -> np.dtype:
    """The requested output dtype (default the table's), refusing one wider than the table stores: a
    409, as the table's state is what refuses it (a valid dtype; a float64 table would serve it)."""
    out = table.spec.np_dtype if dtype is None else output_dtype(dtype)
    if not table.spec.serves_dtype(out):
        raise HttpError("conflict", f"dtype: table {table.name!r} stores {table.spec.dtype}; {out.name} output "
                        "would claim precision it does not have (ask /v1 for a computed answer)", "dtype")
    return out


async def rows_response(request: Request, media: str, table: Table, positions, dtype,
                        arrangement: str | None = None) -> Response:
    """The table's rows at `positions` as `dtype`; for a RoPE table, each half of [cos | sin] laid
    out as `arrangement` (posenc.api.rope.arrange_rows; None: as stored)."""
    dtype = dtype_for(table, dtype)
    per_freq = 1 if arrangement is None else ARRANGEMENTS[arrangement]

    def rows():
        found = table.rows(positions, dtype)
        return found if arrangement is None else arrange_rows(found, arrangement)

    response = await respond(request, media, rows, int(np.size(positions)) * table.spec.width * per_freq,
                             gathered=True)
    service_of(request).metrics.table(hit=True)  # once answered: see _from_spec_or_table
    return response


@router.post("/{name}/rows", summary="Rows of a table for many positions", responses=array_responses(),
             openapi_extra=request_body(RowsRequest))
async def table_rows(request: Request, name: Annotated[str, _NAME]) -> Response:
    """[n, width] for integer positions in [start, stop) (a computed table: any positions there, fractional
    too); positions as JSON, int64 raw or .npy."""
    call = await read_call(request, RowsRequest)
    table = await named_table(request, name)
    return await rows_response(request, call.media, table, call.arrays["positions"], call.params.dtype)


def _only_dtype_in_query(request: Request) -> None:
    """A typo (`dtyp=`) or a second dtype is refused, as on every other route, not silently ignored."""
    keys = [key for key, _ in request.query_params.multi_items()]
    for key in keys:
        if key != "dtype":
            raise HttpError("invalid_parameter", f"unknown query parameter {key!r}: this route takes dtype only", key)
    if len(keys) > 1:
        raise HttpError("invalid_parameter", "query parameter 'dtype' is given more than once", "dtype")


@router.get("/{name}/rows/{position}", summary="One row of a table (the hot path)", responses=array_responses())
async def table_row(request: Request, name: Annotated[str, _NAME],
                    position: Annotated[str, Path(description="Absolute position (an integer).",
                                                  pattern=POSITION_PATTERN, examples=["4095"])],
                    dtype: Annotated[Dtype | None, Query(description="Output dtype, default the table's.")] = None
                    ) -> Response:
    """One row, shape [width]. Without query parameters (or with dtype only) this is served by the raw-ASGI
    fast path."""
    _only_dtype_in_query(request)
    media = negotiate(request.headers.get("accept"))
    table = await named_table(request, name)
    out = dtype_for(table, dtype)
    at = int(position)
    if not table.start <= at < table.stop:  # the row does not exist (a valid position: another table may hold it)
        raise HttpError("not_found", f"position: table {name!r} has no row {at}; it holds positions "
                        f"[{table.start}, {table.stop})", "position")
    response = await respond(request, media, lambda: table.rows([at], out)[0], table.spec.width, gathered=True)
    service_of(request).metrics.table(hit=True)  # after the answer, as every table hit is counted
    return response
