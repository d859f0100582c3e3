"""HTTP routes of single units. Thin: parse, call the service in one transaction, answer."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from sqlalchemy.ext.asyncio import AsyncConnection
from starlette.responses import Response

from units_api import tracing
from units_api.auth.access import authorize
from units_api.auth.scopes import UNITS_PUBLISH, UNITS_READ, UNITS_WRITE
from units_api.auth.service import Principal
from units_api.channels.readiness import rules_text
from units_api.channels.repository import kinds as channel_kinds
from units_api.config import DEFAULTS
from units_api.context import app_context
from units_api.db import Connection
from units_api.filters.parser import MAX_LENGTH as MAX_FILTER_LENGTH
from units_api.http import docs
from units_api.http.body import JSON, MERGE_PATCH, read_json
from units_api.http.docs import json_body, problems, ref, success
from units_api.http.etag import etag, if_match, matches
from units_api.http.json import JSONResponse
from units_api.http.middleware import MAX_URL_BYTES
from units_api.http.paging import Limit, link_header
from units_api.http.paths import ID
from units_api.search.normalize import SEARCH_FIELDS
from units_api.units import availability, bulk, listing, publishing, service
from units_api.units.listing import (
    COUNT_MODES,
    LIST_LIMIT,
    MAX_DEPTH,
    parse_list_params,
)
from units_api.units.query import run_query
from units_api.units.schemas import (
    MAX_ITEMS,
    MAX_MATCHED,
    MAX_QUERY_LENGTH,
    PROJECTABLE_ORDER,
    QueryRequest,
)
from units_api.units.service import Vocabularies, Written
from units_api.units.sorting import SORT_NAMES
from units_api.validation import parse_model

router = APIRouter(prefix="/api/v2/units", tags=["units"])
StateAction = Callable[[AsyncConnection, uuid.UUID, Any, str | None, Principal], Awaitable[Written]]
Update = Callable[
    [Connection | service.Gathered, uuid.UUID, Any, str | None, Principal, Vocabularies],
    Awaitable[Written],
]

# The busiest operations, one unit's and the list: served without the framework's routing
# layers (http/direct.py); each endpoint takes only its path parameters and the request.
DIRECT_OPERATIONS = (
    "listUnits",
    "createUnit",
    "getUnit",
    "replaceUnit",
    "patchUnit",
    "deleteUnit",
    "listUnitHistory",
    "runPublishingAction",
    "runAvailabilityAction",
)
HISTORY_LIMIT = Limit(default=50, maximum=200)
UnitId = Annotated[uuid.UUID, Path(description="The unit's id (a UUID).")]
IDEMPOTENCY_KEY = docs.idempotency_key(DEFAULTS.idempotency_ttl_seconds)
COUNT_BUDGET_SECONDS = DEFAULTS.count_budget_ms / 1000
# The longest list filter any URL holds (a longer one goes in the query endpoint's body).
FILTER_ROOM = docs.url_room(f"{router.prefix}/", "p")


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
    operation_id="listUnits",
    summary="List units (most recent first)",
    description="Kept for compatibility and limited use: deep reads belong to the query "
    f"endpoint and exports (page x limit is capped at {MAX_DEPTH:,}). `p` filters with RSQL "
    "(e.g. `city==Cairo;price=ge=1000000`, `floorsPlan.rooms=ge=3`); `Prefer: count=exact|"
    "estimated|none` chooses how `meta.total` is counted; without it the total is exact, "
    "unless counting it exactly takes longer than the count budget "
    f"({COUNT_BUDGET_SECONDS:g} s by default, `UNITS_API_COUNT_BUDGET_MS`): then it is the "
    "estimate and `meta.count` says `estimated`. A bad parameter is a 400 naming it.",
    responses={**success(200, "UnitPage", "A page of units", ("Link",)), **problems(400)},
    openapi_extra={
        "parameters": [
            docs.limit(LIST_LIMIT),
            docs.query(
                "page",
                f"Page number, from 1; page x limit may not pass {MAX_DEPTH:,} (deeper reads: "
                "the query endpoint or an export).",
                {"type": "integer", "minimum": 1, "maximum": MAX_DEPTH, "default": 1},
            ),
            docs.query(
                "sortBy",
                "Comma list of sort fields, each at most once (default `createdAt`); ties "
                "break on `id`. `relevance` needs `q`: units where more words of `q` match "
                "as written (not only by stem or prefix) come first, then those where they "
                "match in `name` or `unitNameAr`, then the most recent (`order=desc`, the "
                "default, is best first). `distance` needs exactly one `unitLocation=near=` "
                "in `p`, joined to the rest by `;`: nearest first (its default order; "
                "`order=desc` is the farthest first), and each unit, projected or not, "
                "carries `distanceMeters`: its great-circle distance from the point in metres "
                "(a number).",
                docs.comma_list(SORT_NAMES, "createdAt"),
            ),
            docs.query(
                "order",
                "`asc` or `desc` (default; `asc` for `distance`) for every sort field, or one "
                "per `sortBy` field.",
                docs.comma_list(("asc", "desc"), "desc"),
            ),
            docs.query(
                "fields",
                "Comma list of the fields to return; `id` always.",
                docs.comma_list(PROJECTABLE_ORDER),
            ),
            docs.query(
                "p",
                "Filter (RSQL), e.g. `city==Cairo;price=ge=1000000`. The URL may be up to "
                f"{MAX_URL_BYTES:,} bytes (a longer one is a 414), and a character may take "
                f"up to {docs.ENCODED_CHAR_BYTES} of them percent-encoded: a filter of "
                f"{FILTER_ROOM:,} characters always fits, a longer one only while the URL "
                "does. A filter of up to "
                f"{MAX_FILTER_LENGTH:,} characters goes in the query endpoint's body.",
                {"type": "string", "maxLength": FILTER_ROOM},
            ),
            docs.query(
                "q",
                "Search text: every word, in "
                + ", ".join(f"`{name}`" for name in SEARCH_FIELDS)
                + " (English or Arabic), by its stem or as a prefix: Arabic words lose "
                "their article, attached conjunction and common suffixes (light10) and are "
                "found with an attached preposition (`حديقة` finds `بحديقة`), English words "
                "are stemmed by Snowball (`apartments` finds `apartment`); `pentho` finds "
                "`penthouse`.",
                {"type": "string", "maxLength": MAX_QUERY_LENGTH},
            ),
            docs.header(
                "Prefer",
                "`count=exact`, `count=estimated` or `count=none` chooses how `meta.total` is "
                "counted; other preferences are ignored.",
                {"type": "string", "examples": [f"count={mode}" for mode in COUNT_MODES]},
            ),
        ]
    },
)
async def list_units(request: Request) -> Response:
    # The parameters are read and checked by parse_list_params, which names the bad one.
    principal = await authorize(request, UNITS_READ)
    context = app_context(request)
    params = parse_list_params(request)
    page_body = await listing.list_units(
        context.db,
        context.counts,
        params,
        request.url,
        principal.policy_tree,
        context.settings.count_budget_ms,
        context.settings.search_few_matches,
        context.located_by_time,
    )
    return JSONResponse(page_body, headers={"Link": link_header(page_body["links"])})


@router.post(
    "",
    status_code=201,
    operation_id="createUnit",
    summary="Create a unit",
    responses={
        **success(201, "UnitRead", "The created unit", ("Location", "ETag", "Idempotent-Replayed")),
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

    vocabularies = context.settings.vocabularies
    gatherer = context.writes
    if gatherer is not None and not context.idempotency.asked(request) and not tracing.on:
        written = await service.create_gathered(gatherer, body.value, principal, vocabularies)
        return _unit_response(written, 201)

    async def operation(conn: Connection) -> Response:
        written = await service.create(conn, body.value, principal, vocabularies)
        return _unit_response(written, 201)

    return await context.idempotency.run_on_driver(
        request, str(principal.key_id), body.raw, operation
    )


@router.post(
    "/query",
    operation_id="runUnitQuery",
    summary="Query units: filters, search, projection, cursors, aggregates",
    description="Keyset pagination with no depth limit (follow `nextCursor`); a cursor stays "
    "valid while units come and go. With `aggregates`, one row per `groupBy` group "
    "(at most `limit` groups, ordered by the group fields). An aggregate asked again while no "
    "unit has changed is answered from memory: remembered per question (aggregates, groups, "
    "limit, filter, search and the key's policy) with the version of the units it was read "
    "at, and given only while that version is current, so never stale; any write to any "
    "unit makes the next answer a fresh one.",
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
    result = await run_query(
        context.db, spec, principal.policy_tree, context.results, context.dashboards
    )
    return JSONResponse(result)


@router.put(
    "/bulk/update",
    operation_id="bulkUpdateUnits",
    summary="Update many units",
    description='Either `{"units": [{"id", "version"?, ...merge patch}], "atomic": '
    f"true}}` (1..{MAX_ITEMS:,} items; atomic: all or nothing, else each item stands "
    'alone and the results say how each went), or `{"filter": RSQL, "patch": {...}, '
    f'"dryRun": false}}` (one patch for every matching unit, at most {MAX_MATCHED:,}). '
    "Each changed unit gets its version, history entry (`bulk`) and event, as a single "
    "update would.",
    responses={
        **success(
            200, "BulkResult", "Per-item results, or the match counts", ("Idempotent-Replayed",)
        ),
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

    return await context.idempotency.run(
        request, str(principal.key_id), body.raw, operation, long=bulk.is_long(body.value)
    )


@router.put(
    f"/publishing-actions/{ID}",
    operation_id="runPublishingAction",
    summary="Publish, schedule, unpublish, archive or restore a unit",
    description="From draft: publish, schedule, archive. Scheduled: publish, schedule (new "
    "time), unpublish (back to draft), archive. Published: publish (channels updated), "
    "unpublish, archive. Unpublished: publish, schedule, archive. Archived: restore (to "
    "draft). Anything else is a 409 listing `allowedActions`. publish and schedule need a "
    f"ready unit (by default: {publishing.readiness_text(DEFAULTS.readiness)}; "
    "`UNITS_API_PUBLISH_REQUIRES`), else a 422 listing what is missing. `channels` are "
    "names of channels (GET /api/v2/channels): another name is a 422 listing them. Each "
    f"channel's kind adds its own rules ({rules_text()}); a miss is a 422 error on "
    "`channels.<name>.<field>`.",
    responses={
        **success(200, "UnitRead", "The unit after the action", ("ETag",)),
        **problems(400, 404, 409, 412, 413, 415, 422),
    },
    openapi_extra={**json_body("PublishingAction"), "parameters": [docs.IF_MATCH]},
)
async def publishing_action(id: UnitId, request: Request) -> Response:
    readiness = app_context(request).settings.readiness

    async def act(
        conn: AsyncConnection, unit_id: uuid.UUID, body: Any, if_match: str | None, who: Principal
    ) -> Written:
        # Held until the commit: a channel is not deleted while a unit is published to it.
        known = await channel_kinds(conn, share=True)
        return await publishing.act(conn, unit_id, body, if_match, who, readiness, known)

    return await _state_action(request, id, UNITS_PUBLISH, act)


@router.put(
    f"/availability-actions/{ID}",
    operation_id="runAvailabilityAction",
    summary="Reserve, release, sell, block or unblock a unit",
    description="available -> reserved (reserve, `until` in the future) | sold | blocked; "
    "reserved -> reserved (reserve again extends the hold) | available (release, or when "
    "`until` passes) | sold; blocked -> available (unblock); sold is final. Anything else "
    "is a 409 listing `allowedActions`.",
    responses={
        **success(200, "UnitRead", "The unit after the action", ("ETag",)),
        **problems(400, 404, 409, 412, 413, 415, 422),
    },
    openapi_extra={**json_body("AvailabilityAction"), "parameters": [docs.IF_MATCH]},
)
async def availability_action(id: UnitId, request: Request) -> Response:
    return await _state_action(request, id, UNITS_WRITE, availability.act)


async def _state_action(
    request: Request, unit_id: uuid.UUID, scope: str, act: StateAction
) -> Response:
    """A state machine's action: one transaction, the unit's new record as the answer."""
    principal = await authorize(request, scope)
    context = app_context(request)
    expected = if_match(request.headers)
    body = await read_json(request, context.settings.max_body_bytes)
    async with context.db.transaction() as conn:
        written = await act(conn, unit_id, body.value, expected, principal)
    return _unit_response(written)


@router.get(
    f"/{ID}",
    operation_id="getUnit",
    summary="Retrieve a unit",
    responses={
        **success(200, "UnitRead", "The unit", ("ETag",)),
        304: {"description": "Not modified"},
        **problems(404),
    },
    openapi_extra={"parameters": [docs.IF_NONE_MATCH]},
)
async def get_unit(id: UnitId, request: Request) -> Response:
    principal = await authorize(request, UNITS_READ)
    context = app_context(request)
    async with context.db.fast_read() as conn:
        body, version = await service.get(conn, id, principal)
    if matches(request.headers.get("if-none-match"), version):
        return Response(status_code=304, headers={"ETag": etag(version)})
    return Response(body, headers={"ETag": etag(version)}, media_type="application/json")


async def _update(
    request: Request, unit_id: uuid.UUID, media_types: tuple[str, ...], apply: Update
) -> Response:
    principal = await authorize(request, UNITS_WRITE)
    context = app_context(request)
    expected = if_match(request.headers)
    body = await read_json(request, context.settings.max_body_bytes, media_types)
    vocabularies = context.settings.vocabularies
    if context.writes is not None and not tracing.on:
        where = service.Gathered(context.db, context.writes)
        written = await apply(where, unit_id, body.value, expected, principal, vocabularies)
        return _unit_response(written)
    async with context.db.operation() as conn:
        written = await apply(conn, unit_id, body.value, expected, principal, vocabularies)
    return _unit_response(written)


@router.put(
    f"/{ID}",
    operation_id="replaceUnit",
    summary="Replace a unit",
    description="Replaces every editable field: a field left out becomes null or [].",
    responses={
        **success(200, "UnitRead", "The replaced unit", ("ETag",)),
        **problems(400, 404, 412, 413, 415, 422),
    },
    openapi_extra={**json_body("UnitWrite"), "parameters": [docs.IF_MATCH]},
)
async def replace_unit(id: UnitId, request: Request) -> Response:
    return await _update(request, id, JSON, service.replace)


@router.patch(
    f"/{ID}",
    operation_id="patchUnit",
    summary="Partially update a unit (JSON Merge Patch)",
    description="RFC 7396: a key sets, null clears, unitLocation and expense merge key by "
    "key, arrays are replaced whole. The result is validated as a whole.",
    responses={
        **success(200, "UnitRead", "The updated unit", ("ETag",)),
        **problems(400, 404, 412, 413, 415, 422),
    },
    openapi_extra={**json_body("UnitPatch", MERGE_PATCH), "parameters": [docs.IF_MATCH]},
)
async def patch_unit(id: UnitId, request: Request) -> Response:
    return await _update(request, id, MERGE_PATCH, service.patch)


@router.delete(
    f"/{ID}",
    status_code=204,
    operation_id="deleteUnit",
    summary="Delete a unit",
    response_class=Response,
    responses={204: {"description": "Deleted"}, **problems(400, 404, 412)},
    openapi_extra={"parameters": [docs.IF_MATCH]},
)
async def delete_unit(id: UnitId, request: Request) -> Response:
    principal = await authorize(request, UNITS_WRITE)
    context = app_context(request)
    expected = if_match(request.headers)
    async with context.db.operation() as conn:
        await service.delete(conn, id, expected, principal)
    return Response(status_code=204)


@router.get(
    f"/{ID}/history",
    operation_id="listUnitHistory",
    summary="A unit's change history, newest first",
    description="Field-level diffs of every change; stays readable after the unit is deleted. "
    "Follow `nextCursor` until it is null; a bad `limit` or `cursor` is a 400.",
    responses={**success(200, "HistoryPage", "A page of history entries"), **problems(400, 404)},
    openapi_extra={"parameters": [docs.limit(HISTORY_LIMIT), docs.CURSOR]},
)
async def unit_history(id: UnitId, request: Request) -> Response:
    principal = await authorize(request, UNITS_READ)
    context = app_context(request)
    size = HISTORY_LIMIT.parse(request.query_params.get("limit"))
    cursor = request.query_params.get("cursor")
    async with context.db.fast_read() as conn:
        page = await service.history(conn, id, size, cursor, principal)
    return JSONResponse(page)
