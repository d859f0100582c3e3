"""Admin API for keys: issue, list, read, revoke."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Path, Request
from starlette.responses import Response

from units_api.auth import repository, service
from units_api.auth.access import authorize
from units_api.auth.schemas import ApiKeyCreate
from units_api.auth.scopes import ADMIN
from units_api.auth.service import render_key
from units_api.clock import utcnow
from units_api.context import app_context
from units_api.http import docs
from units_api.http.body import read_json
from units_api.http.docs import json_body, problems, success
from units_api.http.json import JSONResponse
from units_api.http.paging import Limit
from units_api.http.paths import ID
from units_api.validation import parse_model

router = APIRouter(prefix="/api/v2/api-keys", tags=["api keys"])
KEYS_LIMIT = Limit(default=50, maximum=200)
KeyId = Annotated[uuid.UUID, Path(description="The key's id (a UUID).")]


@router.post(
    "",
    status_code=201,
    operation_id="createApiKey",
    summary="Issue an API key",
    description="The secret (`key`) is in this response only; it is stored as a hash.",
    responses={
        **success(201, "ApiKeyCreated", "The key record and its secret", ("Location",)),
        **problems(400, 413, 415, 422),
    },
    openapi_extra=json_body("ApiKeyCreate"),
)
async def create_key(
    request: Request,
) -> Response:
    await authorize(request, ADMIN)
    context = app_context(request)
    body = await read_json(request, context.settings.max_body_bytes)
    spec = parse_model(ApiKeyCreate, body.value)
    async with context.db.transaction() as conn:
        created = await service.create_key(conn, spec)
    return JSONResponse(
        created, status_code=201, headers={"Location": f"/api/v2/api-keys/{created['id']}"}
    )


@router.get(
    "",
    operation_id="listApiKeys",
    summary="List API keys",
    description="Oldest first; follow `nextCursor` until it is null. Revoked keys are listed "
    "with `revokedAt` set.",
    responses={**success(200, "ApiKeyPage", "A page of keys"), **problems(400)},
    openapi_extra={"parameters": [docs.limit(KEYS_LIMIT), docs.CURSOR]},
)
async def list_keys(request: Request) -> Response:
    await authorize(request, ADMIN)
    context = app_context(request)
    size = KEYS_LIMIT.parse(request.query_params.get("limit"))
    cursor = request.query_params.get("cursor")
    async with context.db.read() as conn:
        page = await service.list_keys(conn, size, cursor)
    return JSONResponse(page)


@router.get(
    f"/{ID}",
    operation_id="getApiKey",
    summary="Read an API key",
    responses={**success(200, "ApiKeyRead", "The key record (never the secret)"), **problems(404)},
)
async def get_key(request: Request, id: KeyId) -> Response:
    await authorize(request, ADMIN)
    context = app_context(request)
    async with context.db.read() as conn:
        row = await service.get_key(conn, id)
    return JSONResponse(render_key(row))


@router.delete(
    f"/{ID}",
    status_code=204,
    operation_id="revokeApiKey",
    summary="Revoke an API key",
    response_class=Response,
    responses={204: {"description": "Revoked"}, **problems(404)},
)
async def revoke_key(request: Request, id: KeyId) -> Response:
    await authorize(request, ADMIN)
    context = app_context(request)
    async with context.db.transaction() as conn:
        await service.get_key(conn, id)
        await repository.revoke(conn, id, utcnow())
    context.authenticator.forget(id)
    return Response(status_code=204)
