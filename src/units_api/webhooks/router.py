"""Admin API for webhooks: subscriptions, secrets, test pings, the delivery log."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Path, Request
from starlette.responses import Response

from units_api.auth.access import authorize
from units_api.auth.scopes import ADMIN
from units_api.clock import duration_text
from units_api.context import app_context
from units_api.events.sequencer import sequence
from units_api.http import docs
from units_api.http.body import read_json
from units_api.http.docs import json_body, problems, success
from units_api.http.json import JSONResponse
from units_api.http.paging import Limit
from units_api.http.paths import ID
from units_api.validation import parse_model
from units_api.webhooks import service
from units_api.webhooks.schemas import WebhookCreate, WebhookPatch
from units_api.webhooks.sender import KEEP_AT_MOST

router = APIRouter(prefix="/api/v2/webhooks", tags=["webhooks"])
WEBHOOKS_LIMIT = Limit(default=50, maximum=200)
DELIVERIES_LIMIT = Limit(default=50, maximum=200)
WebhookId = Annotated[uuid.UUID, Path(description="The webhook's id (a UUID).")]
DeliveryId = Annotated[uuid.UUID, Path(description="The delivery's id (a UUID).")]
_ONE = f"/{ID}"


def _location(webhook_id: object) -> str:
    return f"/api/v2/webhooks/{webhook_id}"


@router.post(
    "",
    status_code=201,
    operation_id="createWebhook",
    summary="Subscribe a receiver to events",
    description="The signing secret (`secret`) is in this response only. The webhook receives "
    "the events that happen from its creation on.",
    responses={
        **success(201, "WebhookCreated", "The webhook and its secret", ("Location",)),
        **problems(400, 413, 415, 422),
    },
    openapi_extra=json_body("WebhookCreate"),
)
async def create_webhook(request: Request) -> Response:
    await authorize(request, ADMIN)
    context = app_context(request)
    body = await read_json(request, context.settings.max_body_bytes)
    spec = parse_model(WebhookCreate, body.value)
    # It receives what happens from now on: what committed before is numbered first.
    await sequence(context.db)
    async with context.db.transaction() as conn:
        created = await service.create(conn, spec, context.settings.webhook_allow_private)
    return JSONResponse(created, status_code=201, headers={"Location": _location(created["id"])})


@router.get(
    "",
    operation_id="listWebhooks",
    summary="List webhooks",
    description="Oldest first; follow `nextCursor` until it is null. Never the secrets.",
    responses={**success(200, "WebhookPage", "A page of webhooks"), **problems(400)},
    openapi_extra={"parameters": [docs.limit(WEBHOOKS_LIMIT), docs.CURSOR]},
)
async def list_webhooks(request: Request) -> Response:
    await authorize(request, ADMIN)
    context = app_context(request)
    size = WEBHOOKS_LIMIT.parse(request.query_params.get("limit"))
    async with context.db.read() as conn:
        page = await service.list_page(conn, size, request.query_params.get("cursor"))
    return JSONResponse(page)


@router.get(
    _ONE,
    operation_id="getWebhook",
    summary="Read a webhook",
    responses={**success(200, "WebhookRead", "The webhook (never its secret)"), **problems(404)},
)
async def get_webhook(request: Request, id: WebhookId) -> Response:
    await authorize(request, ADMIN)
    context = app_context(request)
    async with context.db.read() as conn:
        row = await service.get(conn, id)
    return JSONResponse(service.render(row))


@router.patch(
    _ONE,
    operation_id="updateWebhook",
    summary="Change a webhook, or enable it again",
    description="Only the fields sent change; `description` and `filter` are cleared with "
    'null. `{"enabled": true}` enables a disabled webhook: it receives the events that '
    "happen from then on (not those that happened while it was disabled).",
    responses={
        **success(200, "WebhookRead", "The webhook"),
        **problems(400, 404, 413, 415, 422),
    },
    openapi_extra=json_body("WebhookPatch"),
)
async def update_webhook(request: Request, id: WebhookId) -> Response:
    await authorize(request, ADMIN)
    context = app_context(request)
    body = await read_json(request, context.settings.max_body_bytes)
    spec = parse_model(WebhookPatch, body.value)
    if spec.enabled:
        await sequence(context.db)
    async with context.db.transaction() as conn:
        updated = await service.update(conn, id, spec, context.settings.webhook_allow_private)
    return JSONResponse(updated)


@router.delete(
    _ONE,
    status_code=204,
    operation_id="deleteWebhook",
    summary="Delete a webhook and its delivery log",
    response_class=Response,
    responses={204: {"description": "Deleted"}, **problems(404)},
)
async def delete_webhook(request: Request, id: WebhookId) -> Response:
    await authorize(request, ADMIN)
    context = app_context(request)
    async with context.db.transaction() as conn:
        await service.delete(conn, id)
    return Response(status_code=204)


@router.post(
    f"{_ONE}/rotate-secret",
    operation_id="rotateWebhookSecret",
    summary="Rotate a webhook's signing secret",
    description="Answers the webhook with its new `secret`, shown this once. For "
    f"{duration_text(service.ROTATION_GRACE.total_seconds())} every delivery is signed with "
    "both secrets (two signatures in `webhook-signature`), "
    "so receivers can switch without missing one.",
    responses={**success(200, "WebhookCreated", "The webhook and its new secret"), **problems(404)},
)
async def rotate_secret(request: Request, id: WebhookId) -> Response:
    await authorize(request, ADMIN)
    context = app_context(request)
    async with context.db.transaction() as conn:
        rotated = await service.rotate_secret(conn, id)
    return JSONResponse(rotated)


@router.post(
    f"{_ONE}/test",
    operation_id="testWebhook",
    summary="Send a signed test event now",
    description="Sends a `webhook.test` event (signed like any delivery) and answers what the "
    "receiver did: its status (null if no answer came), the time taken and the error, if "
    "any. The ping is in the delivery log (event type `webhook.test`) with its attempt; it is "
    "not retried.",
    responses={**success(200, "TestResult", "The receiver's answer"), **problems(404)},
)
async def test_webhook(request: Request, id: WebhookId) -> Response:
    await authorize(request, ADMIN)
    context = app_context(request)
    async with context.db.read() as conn:
        row = await service.get(conn, id)
    event_id, attempt = await service.test(row, context.sender)
    async with context.db.transaction() as conn:
        await service.record_test(conn, id, event_id, attempt)
    return JSONResponse(
        {
            "statusCode": attempt.status_code,
            "durationMs": attempt.duration_ms,
            "error": attempt.error,
        }
    )


_STATUS = docs.query(
    "status",
    "Only deliveries in this status: " + ", ".join(service.DELIVERY_STATUSES) + ".",
    {"type": "string", "enum": list(service.DELIVERY_STATUSES)},
)
_EVENT_TYPE = docs.query(
    "eventType",
    "Only deliveries of this event type (`webhook.test` for test pings).",
    {"type": "string", "enum": list(service.DELIVERY_EVENT_TYPES)},
)


@router.get(
    f"{_ONE}/deliveries",
    operation_id="listWebhookDeliveries",
    summary="The delivery log",
    description="Newest first; follow `nextCursor` until it is null (with the same `status` "
    "and `eventType`). A value of either that is not in its list is a 400.",
    responses={**success(200, "DeliveryPage", "A page of deliveries"), **problems(400, 404)},
    openapi_extra={"parameters": [docs.limit(DELIVERIES_LIMIT), docs.CURSOR, _STATUS, _EVENT_TYPE]},
)
async def list_deliveries(request: Request, id: WebhookId) -> Response:
    await authorize(request, ADMIN)
    context = app_context(request)
    query = request.query_params
    size = DELIVERIES_LIMIT.parse(query.get("limit"))
    async with context.db.read() as conn:
        page = await service.deliveries(
            conn, id, size, query.get("cursor"), query.get("status"), query.get("eventType")
        )
    return JSONResponse(page)


@router.get(
    f"{_ONE}/deliveries/{{deliveryId:id}}/attempts",
    operation_id="listWebhookDeliveryAttempts",
    summary="Every attempt of a delivery",
    description="Newest first: when, the receiver's status (null if no answer came), the time "
    f"taken, the error and the first {KEEP_AT_MOST:,} bytes of the answer's body (cut at a "
    "character boundary).",
    responses={**success(200, "DeliveryAttempts", "The attempts"), **problems(404)},
)
async def list_attempts(request: Request, id: WebhookId, deliveryId: DeliveryId) -> Response:
    await authorize(request, ADMIN)
    context = app_context(request)
    async with context.db.read() as conn:
        found = await service.attempts(conn, id, deliveryId)
    return JSONResponse(found)


@router.post(
    f"{_ONE}/deliveries/{{deliveryId:id}}/redeliver",
    status_code=202,
    operation_id="redeliverWebhookDelivery",
    summary="Deliver an event again",
    description="A new delivery of the same event (the same `webhook-id`), sent at once; "
    "answers the new delivery. 410 when the event is no longer kept.",
    responses={**success(202, "Delivery", "The new delivery"), **problems(404, 410)},
)
async def redeliver(request: Request, id: WebhookId, deliveryId: DeliveryId) -> Response:
    await authorize(request, ADMIN)
    context = app_context(request)
    async with context.db.transaction() as conn:
        created = await service.redeliver(conn, id, deliveryId)
    return JSONResponse(created, status_code=202)
