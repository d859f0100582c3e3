"""HTTP routes of single units. Thin: parse, call the service in one transaction, answer."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Query, Request
from sqlalchemy.ext.asyncio import AsyncConnection
from starlette.responses import Response

from units_api.auth.access import authorize
from units_api.auth.scopes import UNITS_PUBLISH, UNITS_READ, UNITS_WRITE
from units_api.auth.service import Principal
from units_api.context import app_context
from units_api.http.body import JSON, MERGE_PATCH, read_json
from units_api.http.cursor import parse_limit
from units_api.http.docs import header, json_body, problems, query, ref, success
from units_api.http.etag import etag, matches
from units_api.http.json import JSONResponse
from units_api.units import availability, browse, bulk, publishing, service
from units_api.units.browse import link_header
from units_api.units.listing import SORTABLE, parse_list_params
from units_api.units.query import run_query
from units_api.units.query_schemas import QueryRequest
from units_api.units.service import Vocabularies, Written, parse_unit_id
from units_api.validation import parse_model

router = APIRouter(prefix="/api/v2/units", tags=["units"])
StateAction = Callable[[AsyncConnection, uuid.UUID, Any, Principal, str | None], Awaitable[Written]]
Update = Callable[
    [AsyncConnection, uuid.UUID, Any, str | None, Principal, Vocabularies],
    Awaitable[Written],
]

IF_MATCH = header("If-Match", 'Apply only if the unit is at this version, e.g. "3" (else 412).')
IDEMPOTENCY_KEY = header(
    "Idempotency-Key", "Replays the first response to the same key and body for 24 hours."
)


def unit_location(unit_id: object) -> str:
    return f"/api/v2/units/{unit_id}/"


def _unit_response(written: Written, status: int = 200) -> Response:
    headers = {"ETag": etag(written.version)}
    if status == 201:
        headers["Location"] = unit_location(written.id)
    return Response(
        written.body, status_code=status, headers=headers, media_type="application/json"
    )


@router.get(
    "",
    summary="List units (most recent first)",
    description="Kept for compatibility and limited use: deep reads belong to the query "
    "endpoint and exports (page x limit is capped at 10,000). `p` filters with RSQL "
    "(e.g. `city==Cairo;price=ge=1000000`, `floorsPlan.rooms=ge=3`); `Prefer: count=exact|"
    "estimated|none` chooses how `meta.total` is counted; without it the total is exact, "
    "unless counting it exactly takes longer than the count budget (2 s by default): then "
    "it is the estimate and `meta.count` says `estimated`.",
    responses={**success(200, "UnitPage", "A page of units", ("Link",)), **problems(400)},
    openapi_extra={
        "parameters": [
            query("limit", "1..100, default 20"),
            query("page", ">= 1, default 1"),
            query("sortBy", "comma list: " + ", ".join(SORTABLE)),
            query("order", "asc or desc (default), or one per sortBy"),
            query("fields", "comma list of fields to return; id always"),
            query("p", "filter (RSQL), e.g. city==Cairo;price=ge=1000000"),
            query("q", "search text: every word, as a word or a prefix, in English or Arabic"),
            header("Prefer", "count=exact (default), estimated or none"),
        ]
    },
)
async def list_units(request: Request) -> Response:
    # The parameters are read and checked by parse_list_params, which names the bad one.
    principal = await authorize(request, UNITS_READ)
    context = app_context(request)
    params = parse_list_params(request)
    page_body = await browse.list_units(
        context.db,
        context.counts,
        params,
        request.url,
        principal.policy_tree,
        context.settings.count_budget_ms,
        context.settings.search_few_matches,
    )
    return JSONResponse(page_body, headers={"Link": link_header(page_body["links"])})


@router.post(
    "",
    status_code=201,
    summary="Create a unit",
    responses={
        **success(201, "UnitRead", "The created unit", ("Location", "ETag")),
        **problems(400, 409, 413, 415, 422),
    },
    openapi_extra={**json_body("UnitWrite"), "parameters": [IDEMPOTENCY_KEY]},
)
async def create_unit(
    request: Request,
) -> Response:
    principal = await authorize(request, UNITS_WRITE)
    context = app_context(request)
    body = await read_json(request, context.settings.max_body_bytes)

    async def operation(conn: Any) -> Response:
        written = await service.create(conn, body.value, principal, context.settings.vocabularies)
        return _unit_response(written, 201)

    return await context.idempotency.run(request, str(principal.key_id), body.raw, operation)


@router.post(
    "/query",
    summary="Query units: filters, search, projection, cursors, aggregates",
    description="Keyset pagination with no depth limit (follow `nextCursor`); a cursor stays "
    "valid while units come and go. With `aggregates`, one row per `groupBy` group "
    "(at most `limit` groups, ordered by the group fields).",
    responses={
        **success(200, "QueryResult", "Units and a cursor, or aggregate rows"),
        **problems(400, 413, 415, 422),
    },
    openapi_extra=json_body("QueryRequest"),
)
async def query_units(request: Request) -> Response:
    principal = await authorize(request, UNITS_READ)
    context = app_context(request)
    body = await read_json(request, context.settings.max_body_bytes)
    spec = parse_model(QueryRequest, body.value)
    result = await run_query(context.db, spec, principal.policy_tree)
    return JSONResponse(result)


@router.put(
    "/bulk/update",
    summary="Update many units",
    description='Either `{"units": [{"id", "version"?, ...merge patch}], "atomic": '
    "true}` (1..1000 items; atomic: all or nothing, else each item stands alone and the "
    'results say how each went), or `{"filter": RSQL, "patch": {...}, "dryRun": '
    "false}` (one patch for every matching unit, at most 10,000). Each changed unit gets its "
    "version, history entry (`bulk`) and event, as a single update would.",
    responses={
        **success(200, "BulkResult", "Per-item results, or the match counts"),
        **problems(400, 409, 413, 415, 422),
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": {"oneOf": [ref("BulkItems"), ref("BulkByFilter")]}}
            },
        },
        "parameters": [IDEMPOTENCY_KEY],
    },
)
async def bulk_update(request: Request) -> Response:
    principal = await authorize(request, UNITS_WRITE)
    context = app_context(request)
    body = await read_json(request, context.settings.max_bulk_body_bytes)

    async def operation(conn: Any) -> Response:
        result = await bulk.run(conn, body.value, principal, context.settings.vocabularies)
        return JSONResponse(result)

    return await context.idempotency.run(request, str(principal.key_id), body.raw, operation)


@router.put(
    "/publishing-actions/{id}",
    summary="Publish, schedule, unpublish, archive or restore a unit",
    description="From draft: publish, schedule, archive. Scheduled: publish, schedule (new "
    "time), unpublish (back to draft), archive. Published: publish (channels updated), "
    "unpublish, archive. Unpublished: publish, schedule, archive. Archived: restore (to "
    "draft). Anything else is a 409 listing `allowedActions`. publish and schedule need a "
    "ready unit (name, type, city, price > 0, an image), else a 422 listing what is missing.",
    responses={
        **success(200, "UnitRead", "The unit after the action", ("ETag",)),
        **problems(400, 404, 409, 412, 413, 415, 422),
    },
    openapi_extra={**json_body("PublishingAction"), "parameters": [IF_MATCH]},
)
async def publishing_action(id: str, request: Request) -> Response:
    readiness = app_context(request).settings.readiness

    async def apply(
        conn: AsyncConnection, unit_id: uuid.UUID, body: Any, who: Principal, if_match: str | None
    ) -> Written:
        return await publishing.act(conn, unit_id, body, if_match, who, readiness)

    return await _state_action(request, id, UNITS_PUBLISH, apply)


@router.put(
    "/availability-actions/{id}",
    summary="Reserve, release, sell, block or unblock a unit",
    description="available -> reserved (reserve, `until` in the future) | sold | blocked; "
    "reserved -> reserved (reserve again extends the hold) | available (release, or when "
    "`until` passes) | sold; blocked -> available (unblock); sold is final. Anything else "
    "is a 409 listing `allowedActions`.",
    responses={
        **success(200, "UnitRead", "The unit after the action", ("ETag",)),
        **problems(400, 404, 409, 412, 413, 415, 422),
    },
    openapi_extra={**json_body("AvailabilityAction"), "parameters": [IF_MATCH]},
)
async def availability_action(id: str, request: Request) -> Response:
    async def apply(
        conn: AsyncConnection, unit_id: uuid.UUID, body: Any, who: Principal, if_match: str | None
    ) -> Written:
        return await availability.act(conn, unit_id, body, if_match, who)

    return await _state_action(request, id, UNITS_WRITE, apply)


async def _state_action(request: Request, id: str, scope: str, apply: StateAction) -> Response:
    """A state machine's action: one transaction, the unit's new record as the answer."""
    principal = await authorize(request, scope)
    context = app_context(request)
    unit_id = parse_unit_id(id)
    body = await read_json(request, context.settings.max_body_bytes)
    async with context.db.transaction() as conn:
        written = await apply(conn, unit_id, body.value, principal, request.headers.get("if-match"))
    return _unit_response(written)


@router.get(
    "/{id}",
    summary="Retrieve a unit",
    responses={
        **success(200, "UnitRead", "The unit", ("ETag",)),
        304: {"description": "Not modified"},
        **problems(404),
    },
    openapi_extra={"parameters": [header("If-None-Match", "Answer 304 if the ETag matches.")]},
)
async def get_unit(
    id: str,
    request: Request,
) -> Response:
    principal = await authorize(request, UNITS_READ)
    context = app_context(request)
    unit_id = parse_unit_id(id)
    body, version = await service.get(context.db, unit_id, principal)
    if matches(request.headers.get("if-none-match"), version):
        return Response(status_code=304, headers={"ETag": etag(version)})
    return Response(body, headers={"ETag": etag(version)}, media_type="application/json")


async def _update(
    request: Request, id: str, media_types: tuple[str, ...], apply: Update
) -> Response:
    principal = await authorize(request, UNITS_WRITE)
    context = app_context(request)
    unit_id = parse_unit_id(id)
    body = await read_json(request, context.settings.max_body_bytes, media_types)
    async with context.db.transaction() as conn:
        written = await apply(
            conn,
            unit_id,
            body.value,
            request.headers.get("if-match"),
            principal,
            context.settings.vocabularies,
        )
    return _unit_response(written)


@router.put(
    "/{id}",
    summary="Replace a unit",
    description="Replaces every editable field: a field left out becomes null or [].",
    responses={
        **success(200, "UnitRead", "The replaced unit", ("ETag",)),
        **problems(400, 404, 412, 413, 415, 422),
    },
    openapi_extra={**json_body("UnitWrite"), "parameters": [IF_MATCH]},
)
async def replace_unit(id: str, request: Request) -> Response:
    return await _update(request, id, JSON, service.replace)


@router.patch(
    "/{id}",
    summary="Partially update a unit (JSON Merge Patch)",
    description="RFC 7396: a key sets, null clears, unitLocation and expense merge key by "
    "key, arrays are replaced whole. The result is validated as a whole.",
    responses={
        **success(200, "UnitRead", "The updated unit", ("ETag",)),
        **problems(400, 404, 412, 413, 415, 422),
    },
    openapi_extra={**json_body("UnitPatch", MERGE_PATCH), "parameters": [IF_MATCH]},
)
async def patch_unit(id: str, request: Request) -> Response:
    return await _update(request, id, MERGE_PATCH, service.patch)


@router.delete(
    "/{id}",
    status_code=204,
    summary="Delete a unit",
    response_class=Response,
    responses={204: {"description": "Deleted"}, **problems(404, 412)},
    openapi_extra={"parameters": [IF_MATCH]},
)
async def delete_unit(
    id: str,
    request: Request,
) -> Response:
    principal = await authorize(request, UNITS_WRITE)
    context = app_context(request)
    unit_id = parse_unit_id(id)
    async with context.db.transaction() as conn:
        await service.delete(conn, unit_id, request.headers.get("if-match"), principal)
    return Response(status_code=204)


@router.get(
    "/{id}/history",
    summary="A unit's change history, newest first",
    description="Field-level diffs of every change; stays readable after the unit is deleted.",
    responses={**success(200, "HistoryPage", "A page of history entries"), **problems(400, 404)},
)
async def unit_history(
    request: Request,
    id: str,
    limit: str | None = Query(None, description="1..200, default 50"),
    cursor: str | None = Query(None, description="nextCursor of the previous page"),
) -> Response:
    principal = await authorize(request, UNITS_READ)
    context = app_context(request)
    unit_id = parse_unit_id(id)
    size = parse_limit(limit, default=50, maximum=200)
    async with context.db.read() as conn:
        page = await service.history(conn, unit_id, size, cursor, principal)
    return JSONResponse(page)
