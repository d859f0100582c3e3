"""Channels: where units are published to (section 17), and a unit's standing on each."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Path, Request
from starlette.responses import Response

from units_api.auth.access import authorize
from units_api.auth.scopes import ADMIN, UNITS_READ
from units_api.channels import service
from units_api.channels.readiness import NAME_PATTERN, rules_text
from units_api.channels.schemas import ChannelPut
from units_api.context import app_context
from units_api.errors import RateLimited
from units_api.http.body import read_json
from units_api.http.docs import json_body, problems, success
from units_api.http.json import JSONResponse
from units_api.http.paths import ID
from units_api.http.ratelimit import Decision, per_address
from units_api.http.rates import parse_rate
from units_api.validation import parse_model

router = APIRouter(tags=["channels"])
PREFIX = "/api/v2/channels"
ChannelName = Annotated[
    str, Path(description=f"The channel's name ({NAME_PATTERN}).", max_length=100)
]
UnitId = Annotated[uuid.UUID, Path(description="The unit's id (a UUID).")]


def public_base(request: Request) -> str:
    """The public pages' base URL: the setting, or this request's own scheme and host."""
    configured = app_context(request).settings.public_base_url
    if configured:
        return configured
    # As request.url would say it, without building the whole URL (a page's hot path).
    host = request.headers.get("host")
    if host:
        return f"{request.scope.get('scheme', 'http')}://{host}"
    return f"{request.url.scheme}://{request.url.netloc}"


async def public_limit(request: Request) -> Decision:
    """One request of the public pages, sitemaps and feeds against the per-address limit
    (UNITS_API_PUBLIC_RATE_LIMIT)."""
    context = app_context(request)
    rate = parse_rate(context.settings.public_rate_limit)
    return await per_address(context.limiter, request.client, rate)


async def check_public_limit(request: Request) -> None:
    """The per-address limit as a 429 problem with Retry-After (what is not a page)."""
    decision = await public_limit(request)
    if not decision.allowed:
        retry = {"Retry-After": str(decision.reset)}
        raise RateLimited("Too many requests from this address; wait, then ask.", headers=retry)


@router.get(
    PREFIX,
    operation_id="listChannels",
    summary="List channels",
    description="Every channel, by name. Every database has `website`.",
    responses={**success(200, "ChannelList", "The channels"), **problems(400)},
)
async def list_channels(request: Request) -> Response:
    await authorize(request, UNITS_READ)
    context = app_context(request)
    async with context.db.read() as conn:
        return JSONResponse(await service.list_all(conn, public_base(request)))


@router.get(
    PREFIX + "/{name}",
    operation_id="getChannel",
    summary="Read a channel",
    responses={
        **success(200, "ChannelRead", "The channel (never its feed token)"),
        **problems(404),
    },
)
async def get_channel(request: Request, name: ChannelName) -> Response:
    await authorize(request, UNITS_READ)
    context = app_context(request)
    async with context.db.read() as conn:
        return JSONResponse(await service.get(conn, name, public_base(request)))


@router.put(
    PREFIX + "/{name}",
    operation_id="putChannel",
    summary="Create or replace a channel",
    description="Names are 1-40 of `a-z 0-9 -`. A `meta-catalog` channel is given a feed token "
    "when it is created (or becomes one): `feedToken`, in this answer only; its feed is "
    "fetched with HTTP Basic (the channel's name, the token). Readiness rules by kind, "
    f"checked at publish and schedule: {rules_text()} The `website` channel is always of "
    "kind `website`. Answers 201 when created, 200 when replaced; writes a `channel.created` "
    "or `channel.updated` event.",
    responses={
        **success(200, "ChannelWritten", "The channel, replaced"),
        **success(201, "ChannelWritten", "The channel, created"),
        **problems(400, 409, 413, 415, 422),
    },
    openapi_extra=json_body("ChannelPut"),
)
async def put_channel(request: Request, name: ChannelName) -> Response:
    principal = await authorize(request, ADMIN)
    context = app_context(request)
    body = await read_json(request, context.settings.max_body_bytes)
    spec = parse_model(ChannelPut, body.value)
    async with context.db.transaction() as conn:
        written, created = await service.put(conn, name, spec, public_base(request), principal)
    context.channels.forget()
    return JSONResponse(written, status_code=201 if created else 200)


@router.delete(
    PREFIX + "/{name}",
    status_code=204,
    operation_id="deleteChannel",
    summary="Delete a channel",
    description="Takes the name out of every unit's `publishing.channels`: each such unit gets "
    "a new version, a history entry and a `unit.updated` event whose `changes` show its "
    "publishing before and after (a follower whose filter names the channel is told the unit "
    "left it). Then a `channel.deleted` event. `website` cannot be deleted (409).",
    response_class=Response,
    responses={204: {"description": "Deleted"}, **problems(404, 409)},
)
async def delete_channel(request: Request, name: ChannelName) -> Response:
    principal = await authorize(request, ADMIN)
    context = app_context(request)
    async with context.db.transaction() as conn:
        await service.delete_one(conn, name, public_base(request), principal)
    context.channels.forget()
    return Response(status_code=204)


@router.post(
    PREFIX + "/{name}/rotate-token",
    operation_id="rotateChannelToken",
    summary="Give a meta-catalog channel a new feed token",
    description="Answers the channel with its new `feedToken`, shown this once; the old token "
    "stops working at once (update the feed's schedule in Meta's catalog). Other kinds have "
    "no token: 409.",
    responses={
        **success(200, "ChannelWritten", "The channel and its new token"),
        **problems(404, 409),
    },
)
async def rotate_token(request: Request, name: ChannelName) -> Response:
    principal = await authorize(request, ADMIN)
    context = app_context(request)
    async with context.db.transaction() as conn:
        rotated = await service.rotate_token(conn, name, public_base(request), principal)
    return JSONResponse(rotated)


@router.get(
    f"/api/v2/units/{ID}/channels",
    operation_id="listUnitChannels",
    summary="A unit's standing on each of its channels",
    description="For every channel in the unit's `publishing.channels`: its kind, whether the "
    "unit is live on it, where buyers find it, and what the channel's rules lack now.",
    responses={**success(200, "UnitChannels", "The unit's channels"), **problems(404)},
)
async def unit_channels(request: Request, id: UnitId) -> Response:
    principal = await authorize(request, UNITS_READ)
    context = app_context(request)
    async with context.db.read() as conn:
        found = await service.unit_channels(conn, id, principal, public_base(request))
    return JSONResponse(found)
