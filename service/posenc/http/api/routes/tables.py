"""Table listing (open) and create/replace/delete (behind POSENC_API_KEY)."""

from __future__ import annotations

import hmac
from typing import Annotated

import anyio.to_thread
from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from ....shm import list_tables
from ....shm.paths import check_name
from ....tables import TableSpec
from ..calls import read_call, service_of
from ..codecs import JSON, media_type
from ..errors import HttpError
from ..openapi import error_responses
from ..schemas import TABLE_NAME_PATTERN, TableCreateRequest, TableInfoResponse, TableListResponse, public_table_info
from ..uploads import UPLOAD_TYPES, table_request_body, uploaded_table

router = APIRouter(prefix="/v1/tables", tags=["tables"])
_bearer = HTTPBearer(auto_error=False, description="The service's POSENC_API_KEY.")
_NAME = Path(description="Table name: 1..64 of [A-Za-z0-9_.-], not '.', no '..'.", examples=["sin128"],
             min_length=1, max_length=64, pattern=TABLE_NAME_PATTERN)


def require_api_key(request: Request,
                    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> None:
    key = service_of(request).config.api_key
    if key is None:
        raise HttpError("forbidden", "table management is off: start the service with POSENC_API_KEY set")
    if credentials is None or not hmac.compare_digest(credentials.credentials.encode(), key.encode()):
        raise HttpError("unauthorized", "send Authorization: Bearer <POSENC_API_KEY>", "authorization",
                        headers={"www-authenticate": "Bearer"})


async def _infos(request: Request) -> list[dict]:
    infos = await anyio.to_thread.run_sync(list_tables, service_of(request).config.server.shm_dir)
    return [public_table_info(info) for info in infos]


@router.get("", summary="List tables", response_model=TableListResponse)
async def tables(request: Request) -> dict:
    """Every segment in the shm directory; only state READY is served."""
    return {"tables": await _infos(request)}


@router.get("/{name}", summary="Describe one table", response_model=TableInfoResponse,
            responses=error_responses(404, 422))
async def table(request: Request, name: Annotated[str, _NAME]) -> dict:
    check_name(name)
    for info in await _infos(request):
        if info["name"] == name and info["state"] == "READY":
            return info
    raise HttpError("not_found", f"no table named {name!r}", "name")


@router.put("/{name}", summary="Create or replace a table", status_code=201, response_model=TableInfoResponse,
            dependencies=[Depends(require_api_key)],
            responses=error_responses(400, 401, 403, 406, 408, 409, 413, 415, 422, 503),
            openapi_extra=table_request_body(TableCreateRequest))
async def create_table(request: Request, name: Annotated[str, _NAME]) -> dict:
    """Build the table into shared memory (a new generation if it exists) and publish it. A JSON
    body is a table spec; a .npy or safetensors body is a learned table's values (`http.uploads`)."""
    check_name(name)
    media = media_type(request.headers.get("content-type"))
    if media in UPLOAD_TYPES:
        spec = await uploaded_table(request, media)
    elif media != JSON:
        raise HttpError("unsupported_media_type", f"Content-Type {media!r}: send a JSON table spec, or a learned "
                        f"table as one of {list(UPLOAD_TYPES)}", "content-type")
    else:
        call = await read_call(request, TableCreateRequest)
        spec = TableSpec.from_dict(call.params.model_dump(exclude_unset=True, exclude_none=True))  # its defaults
    info = await service_of(request).publish(name, spec)
    return public_table_info(info)


@router.delete("/{name}", summary="Remove a table", status_code=204, response_class=Response,
               dependencies=[Depends(require_api_key)], responses=error_responses(401, 403, 404, 409, 422))
async def delete_table(request: Request, name: Annotated[str, _NAME]) -> Response:
    check_name(name)
    await service_of(request).remove(name)
    return Response(status_code=204)
