"""Webhooks: subscriptions, their secrets, the delivery log, test pings and redelivery; the
rules for retrying a delivery and disabling a webhook (the worker's and the admin's)."""

from __future__ import annotations

import base64
import logging
import secrets as random
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from random import uniform
from typing import Any

import orjson
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.clock import duration_text, format_time, utcnow
from units_api.errors import Gone, InvalidParameter, NotFound, ValidationFailed
from units_api.events import repository as events_repository
from units_api.events.types import EVENT_TYPES, NON_UNIT_EVENT_TYPES, TEST_EVENT_TYPE
from units_api.filters.evaluate import compile_filter
from units_api.filters.parser import parse_filter
from units_api.http.paging import UUID, Keyset
from units_api.ids import uuid7
from units_api.units.filtering import UNIT_CATALOGUE
from units_api.webhooks import repository
from units_api.webhooks.guard import UnsafeTarget, check_url
from units_api.webhooks.repository import FAILED, PENDING, SUCCEEDED
from units_api.webhooks.schemas import SECRET_PREFIX, WebhookCreate, WebhookPatch
from units_api.webhooks.sender import Attempt, Sender

log = logging.getLogger(__name__)

ROTATION_GRACE = timedelta(hours=24)
WEBHOOKS_KEYSET = Keyset("webhooks", (UUID,))
DELIVERIES_KEYSET = Keyset("webhook-deliveries", (UUID,))
DELIVERY_STATUSES = (PENDING, SUCCEEDED, FAILED)
DELIVERY_EVENT_TYPES = (*EVENT_TYPES, TEST_EVENT_TYPE)


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(random.token_bytes(32)).decode()


def render(row: RowMapping) -> dict[str, Any]:
    return {
        "id": str(row["id"]),
        "url": row["url"],
        "eventTypes": orjson.loads(row["event_types"]),
        "description": row["description"],
        "filter": row["filter"],
        "enabled": row["enabled"],
        "disabledReason": row["disabled_reason"],
        "createdAt": format_time(row["created_at"]),
        "updatedAt": format_time(row["updated_at"]),
    }


def render_delivery(row: RowMapping) -> dict[str, Any]:
    return {
        "id": str(row["id"]),
        "eventId": str(row["event_id"]),
        "eventType": row["event_type"],
        "status": row["status"],
        "attempts": row["attempts"],
        "nextAttemptAt": format_time(row["next_attempt_at"]),
        "lastAttemptAt": format_time(row["last_attempt_at"]),
        "lastStatusCode": row["last_status_code"],
        "lastError": row["last_error"],
        "lastDurationMs": row["last_duration_ms"],
        "lastResponse": row["last_response"],
    }


def render_attempt(row: RowMapping) -> dict[str, Any]:
    return {
        "attemptedAt": format_time(row["attempted_at"]),
        "statusCode": row["status_code"],
        "durationMs": row["duration_ms"],
        "error": row["error"],
        "responseBody": row["response_body"],
    }


def signing_secrets(row: RowMapping) -> list[str]:
    """The secret, and during a rotation's grace period the previous one too."""
    until = row["previous_secret_until"]
    if row["previous_secret"] and until is not None and until > utcnow():
        return [row["secret"], row["previous_secret"]]
    return [row["secret"]]


def _check_filter(text: str) -> None:
    try:
        compile_filter(parse_filter(text, "filter"), UNIT_CATALOGUE, "filter")
    except InvalidParameter as exc:
        raise ValidationFailed([("filter", exc.detail.removeprefix("filter: "))]) from None


def _check_unit_types(filter_text: str | None, event_types: list[str], field: str) -> None:
    """A filter judges units: with job or channel event types (whose events have no unit) it
    is refused, on `field`."""
    jobs = [name for name in event_types if name in NON_UNIT_EVENT_TYPES]
    if filter_text is not None and jobs:
        raise ValidationFailed(
            [
                (
                    field,
                    "a filter judges units and job and channel events have none: leave out "
                    f"the filter or those event types ({', '.join(jobs)}); a webhook without "
                    "a filter "
                    "receives them",
                )
            ]
        )


async def _check_target(url: str, allow_private: bool) -> None:
    try:
        await check_url(url, allow_private)
    except UnsafeTarget as exc:
        raise ValidationFailed([("url", str(exc))]) from None


async def _head(conn: AsyncConnection) -> int:
    return (await events_repository.positions(conn))["head"]


async def create(conn: AsyncConnection, spec: WebhookCreate, allow_private: bool) -> dict[str, Any]:
    """A webhook, with its secret shown this once. It receives events from now on."""
    await _check_target(spec.url, allow_private)
    if spec.filter is not None:
        _check_filter(spec.filter)
    _check_unit_types(spec.filter, spec.eventTypes, "filter")
    now = utcnow()
    secret = spec.secret or new_secret()
    webhook_id = uuid7()
    values = {
        "id": webhook_id,
        "url": spec.url,
        "event_types": orjson.dumps(spec.eventTypes).decode(),
        "description": spec.description,
        "filter": spec.filter,
        "secret": secret,
        "enabled": True,
        "since_pos": await _head(conn),
        "created_at": now,
        "updated_at": now,
    }
    await repository.insert(conn, values)
    return {**render(await get(conn, webhook_id)), "secret": secret}


async def get(conn: AsyncConnection, webhook_id: uuid.UUID, lock: bool = False) -> RowMapping:
    row = await repository.by_id(conn, webhook_id, lock)
    if row is None:
        raise NotFound(f"No webhook {webhook_id}.")
    return row


async def list_page(conn: AsyncConnection, limit: int, cursor: str | None) -> dict[str, Any]:
    after = WEBHOOKS_KEYSET.decode(cursor)
    rows = await repository.page(conn, after[0] if after else None, limit + 1)
    shown, next_cursor = WEBHOOKS_KEYSET.page(rows, limit, lambda row: (row["id"],))
    return {"data": [render(row) for row in shown], "nextCursor": next_cursor}


_NOT_NULL = ("url", "eventTypes", "enabled")


async def update(
    conn: AsyncConnection, webhook_id: uuid.UUID, spec: WebhookPatch, allow_private: bool
) -> dict[str, Any]:
    sent = spec.model_fields_set
    nulls = [name for name in _NOT_NULL if name in sent and getattr(spec, name) is None]
    if nulls:
        raise ValidationFailed([(name, "must not be null") for name in nulls])
    row = await get(conn, webhook_id, lock=True)
    values: dict[str, Any] = {"updated_at": utcnow()}
    if spec.url is not None:
        await _check_target(spec.url, allow_private)
        values["url"] = spec.url
    if spec.eventTypes is not None:
        values["event_types"] = orjson.dumps(spec.eventTypes).decode()
    if "description" in sent:
        values["description"] = spec.description
    if "filter" in sent:
        if spec.filter is not None:
            _check_filter(spec.filter)
        values["filter"] = spec.filter
    _check_unit_types(
        spec.filter if "filter" in sent else row["filter"],
        spec.eventTypes or orjson.loads(row["event_types"]),
        "filter" if "filter" in sent else "eventTypes",
    )
    if spec.enabled is True and not row["enabled"]:
        # Events that happened while it was disabled are not delivered to it.
        values |= {
            "enabled": True,
            "disabled_reason": None,
            "failing_since": None,
            "since_pos": await _head(conn),
        }
    elif spec.enabled is False and row["enabled"]:
        await disable(
            conn, webhook_id, ADMIN_DISABLED, values["updated_at"], "The webhook was disabled."
        )
    await repository.change(conn, webhook_id, values)
    return render(await get(conn, webhook_id))


async def delete(conn: AsyncConnection, webhook_id: uuid.UUID) -> None:
    await get(conn, webhook_id, lock=True)
    await repository.remove(conn, webhook_id)


async def rotate_secret(conn: AsyncConnection, webhook_id: uuid.UUID) -> dict[str, Any]:
    """A new secret, shown this once; the current one keeps signing for ROTATION_GRACE."""
    row = await get(conn, webhook_id, lock=True)
    secret = new_secret()
    now = utcnow()
    await repository.change(
        conn,
        webhook_id,
        {
            "secret": secret,
            "previous_secret": row["secret"],
            "previous_secret_until": now + ROTATION_GRACE,
            "updated_at": now,
        },
    )
    return {**render(await get(conn, webhook_id)), "secret": secret}


def _one_of(name: str, value: str | None, allowed: tuple[str, ...]) -> str | None:
    if value is not None and value not in allowed:
        raise InvalidParameter(name, f"'{value}' is not one of {', '.join(allowed)}")
    return value


async def deliveries(
    conn: AsyncConnection,
    webhook_id: uuid.UUID,
    limit: int,
    cursor: str | None,
    status: str | None = None,
    event_type: str | None = None,
) -> dict[str, Any]:
    """The delivery log, newest first, of one status and one event type when given."""
    status = _one_of("status", status, DELIVERY_STATUSES)
    event_type = _one_of("eventType", event_type, DELIVERY_EVENT_TYPES)
    await get(conn, webhook_id)
    before = DELIVERIES_KEYSET.decode(cursor)
    rows = await repository.deliveries_page(
        conn, webhook_id, before[0] if before else None, limit + 1, status, event_type
    )
    shown, next_cursor = DELIVERIES_KEYSET.page(rows, limit, lambda row: (row["id"],))
    return {"data": [render_delivery(row) for row in shown], "nextCursor": next_cursor}


async def attempts(
    conn: AsyncConnection, webhook_id: uuid.UUID, delivery_id: uuid.UUID
) -> dict[str, Any]:
    """Every attempt of a delivery of this webhook, newest first."""
    await get(conn, webhook_id)
    if await repository.delivery(conn, webhook_id, delivery_id) is None:
        raise NotFound(f"No delivery {delivery_id} of webhook {webhook_id}.")
    rows = await repository.attempts(conn, delivery_id)
    return {"data": [render_attempt(row) for row in rows]}


async def redeliver(
    conn: AsyncConnection, webhook_id: uuid.UUID, delivery_id: uuid.UUID
) -> dict[str, Any]:
    """A new delivery of the same event (the same `webhook-id`), due at once."""
    await get(conn, webhook_id)
    found = await repository.delivery(conn, webhook_id, delivery_id)
    if found is None:
        raise NotFound(f"No delivery {delivery_id} of webhook {webhook_id}.")
    if found["event_pos"] is None or not await events_repository.at(conn, [found["event_pos"]]):
        raise Gone("The event of this delivery is no longer kept.")
    now = utcnow()
    row = repository.new_delivery(
        webhook_id,
        found["event_id"],
        found["event_pos"],
        found["event_type"],
        now,
        bool(found["unit_left"]),
    )
    await repository.insert_deliveries(conn, [row])
    created = await repository.delivery(conn, webhook_id, row["id"])
    assert created is not None
    return render_delivery(created)


async def test(row: RowMapping, sender: Sender) -> tuple[uuid.UUID, Attempt]:
    """Send a signed `webhook.test` event now; its id and what the receiver did."""
    event_id = uuid7()
    body = orjson.dumps(
        {
            "id": str(event_id),
            "type": TEST_EVENT_TYPE,
            "occurredAt": format_time(utcnow()),
            "unitId": None,
            "version": None,
            "actor": {"type": "system", "id": None, "name": "webhook test"},
            "data": {"webhookId": str(row["id"])},
        }
    )
    return event_id, await sender.send(row["url"], signing_secrets(row), str(event_id), body)


async def record_test(
    conn: AsyncConnection, webhook_id: uuid.UUID, event_id: uuid.UUID, attempt: Attempt
) -> None:
    """A test ping in the delivery log: one attempt, never retried (nor redelivered: its
    event is not kept). Not recorded if the webhook was deleted meanwhile."""
    if await repository.by_id(conn, webhook_id, lock=True) is None:
        return
    now = utcnow()
    delivery = repository.new_delivery(webhook_id, event_id, None, TEST_EVENT_TYPE, now) | {
        "status": SUCCEEDED if attempt.ok else FAILED,
        "attempts": 1,
        "next_attempt_at": None,
        "last_attempt_at": now,
        "last_status_code": attempt.status_code,
        "last_error": attempt.error,
        "last_duration_ms": attempt.duration_ms,
        "last_response": attempt.response,
    }
    delivery_id = delivery["id"]
    await repository.insert_deliveries(conn, [delivery])
    if not attempt.ok:
        log.warning(
            "webhook delivery attempt failed",
            extra={
                "webhookId": str(webhook_id),
                "deliveryId": str(delivery_id),
                "eventId": str(event_id),
                "attempt": 1,
                "statusCode": attempt.status_code,
                "error": attempt.error,
            },
        )
    await repository.insert_attempts(
        conn,
        [
            {
                "id": uuid7(),
                "delivery_id": delivery_id,
                "attempt": 1,
                "attempted_at": now,
                "status_code": attempt.status_code,
                "duration_ms": attempt.duration_ms,
                "error": attempt.error,
                "response_body": attempt.response,
            }
        ],
    )


# Retries and disabling: what the delivery worker does after an attempt, and how a webhook is
# disabled (by its endpoint's failures, or by an administrator).

# After the first attempt fails: about 5 s, 5 min, 30 min, 2 h, 5 h and 10 h, then failed.
RETRY_DELAYS = (5, 300, 1800, 7200, 18000, 36000)
MAX_ATTEMPTS = len(RETRY_DELAYS) + 1
JITTER = 0.1
FAILING_WINDOW = timedelta(hours=24)
_FAILING_TEXT = duration_text(FAILING_WINDOW.total_seconds())
# A claim outlives the longest attempt (the send timeout) by this much.
LEASE_MARGIN = 10.0
ADMIN_DISABLED = "Disabled by an administrator."


@dataclass(frozen=True, slots=True)
class Timing:
    """Retry timing. `scale` shortens every wait after the first retry and the failing
    window (tests only)."""

    timeout: float
    scale: float = 1.0

    def retry_delay(self, attempts: int, asked: float | None) -> float:
        base = float(RETRY_DELAYS[attempts - 1])
        if attempts > 1:
            base *= self.scale
        delay = base * uniform(1 - JITTER, 1 + JITTER)
        return max(delay, asked) if asked is not None else delay

    @property
    def failing_window(self) -> timedelta:
        return FAILING_WINDOW * self.scale

    @property
    def lease(self) -> timedelta:
        return timedelta(seconds=self.timeout + LEASE_MARGIN)


def after_attempt(
    attempts: int, attempt: Attempt, has_body: bool, timing: Timing, now: datetime
) -> tuple[str, datetime | None]:
    """The status a delivery is left in after its `attempts`-th attempt, and when it is tried
    next: succeeded; failed for good (the event is no longer kept, the endpoint answered 410,
    or no attempt is left); else pending, after the retry schedule's delay (or the endpoint's
    Retry-After, if longer)."""
    if attempt.ok:
        return SUCCEEDED, None
    if not has_body or attempt.status_code == 410 or attempts >= MAX_ATTEMPTS:
        return FAILED, None
    delay = timing.retry_delay(attempts, attempt.retry_after)
    return PENDING, now + timedelta(seconds=delay)


async def judge_endpoints(
    conn: AsyncConnection,
    succeeded: set[uuid.UUID],
    failed: dict[uuid.UUID, Attempt],
    now: datetime,
    timing: Timing,
) -> None:
    """After a batch of attempts: a success clears an endpoint's failing streak; a 410
    disables it at once, and so does failing every delivery for the failing window."""
    await repository.clear_failing(conn, succeeded)
    for webhook_id, attempt in failed.items():
        if webhook_id in succeeded:
            continue
        hook = await repository.by_id(conn, webhook_id, lock=True)
        if hook is None or not hook["enabled"]:
            continue
        reason = None
        if attempt.status_code == 410:
            reason = "The endpoint answered 410 Gone."
        elif hook["failing_since"] is None:
            await repository.change(conn, webhook_id, {"failing_since": now})
        elif now - hook["failing_since"] >= timing.failing_window:
            reason = f"Every delivery failed for {_FAILING_TEXT}."
        if reason is not None:
            await disable(conn, webhook_id, reason, now)


async def disable(
    conn: AsyncConnection,
    webhook_id: uuid.UUID,
    reason: str,
    now: datetime,
    pending_error: str | None = None,
) -> None:
    """Disable a webhook for `reason`; its pending deliveries fail with `pending_error`
    (by default: not sent, and why)."""
    await repository.change(
        conn,
        webhook_id,
        {"enabled": False, "disabled_reason": reason, "failing_since": None, "updated_at": now},
    )
    await repository.fail_pending(conn, webhook_id, pending_error or f"Not sent: {reason}")
