"""Every SQL statement of webhooks and their deliveries."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Integer, Text, Uuid, bindparam, delete, exists, select, update
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.db import UTCDateTime
from units_api.errors import bound_error
from units_api.ids import uuid7
from units_api.webhooks.tables import webhook_deliveries, webhook_delivery_attempts, webhooks

PENDING, SUCCEEDED, FAILED = "pending", "succeeded", "failed"


async def insert(conn: AsyncConnection, values: dict[str, Any]) -> None:
    await conn.execute(webhooks.insert().values(**values))


async def by_id(
    conn: AsyncConnection, webhook_id: uuid.UUID, lock: bool = False
) -> RowMapping | None:
    query = select(webhooks).where(webhooks.c.id == webhook_id)
    if lock:
        query = query.with_for_update()
    return (await conn.execute(query)).mappings().first()


async def page(conn: AsyncConnection, after: uuid.UUID | None, limit: int) -> list[RowMapping]:
    query = select(webhooks).order_by(webhooks.c.id).limit(limit)
    if after is not None:
        query = query.where(webhooks.c.id > after)
    return list((await conn.execute(query)).mappings())


async def enabled(conn: AsyncConnection) -> list[RowMapping]:
    query = select(webhooks).where(webhooks.c.enabled.is_(True)).order_by(webhooks.c.id)
    return list((await conn.execute(query)).mappings())


async def by_ids(conn: AsyncConnection, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, RowMapping]:
    rows = await conn.execute(select(webhooks).where(webhooks.c.id.in_(ids)))
    return {row["id"]: row for row in rows.mappings()}


async def change(conn: AsyncConnection, webhook_id: uuid.UUID, values: dict[str, Any]) -> None:
    await conn.execute(update(webhooks).where(webhooks.c.id == webhook_id).values(**values))


async def clear_failing(conn: AsyncConnection, ids: Collection[uuid.UUID]) -> None:
    """A success ends the failing streak of these webhooks."""
    if ids:
        await conn.execute(
            update(webhooks)
            .where(webhooks.c.id.in_(ids), webhooks.c.failing_since.is_not(None))
            .values(failing_since=None)
        )


async def remove(conn: AsyncConnection, webhook_id: uuid.UUID) -> None:
    await conn.execute(delete(webhooks).where(webhooks.c.id == webhook_id))


# --- deliveries -------------------------------------------------------------------------


def new_delivery(
    webhook_id: uuid.UUID,
    event_id: uuid.UUID,
    event_pos: int | None,
    event_type: str,
    now: datetime,
    unit_left: bool = False,
) -> dict[str, Any]:
    """A delivery's row: pending, not yet attempted, due now. `unit_left`: of the event by
    which its unit left the webhook's filter."""
    return {
        "id": uuid7(),
        "webhook_id": webhook_id,
        "event_id": event_id,
        "event_pos": event_pos,
        "event_type": event_type,
        "unit_left": unit_left,
        "status": PENDING,
        "attempts": 0,
        "next_attempt_at": now,
        "created_at": now,
    }


async def insert_deliveries(conn: AsyncConnection, rows: list[dict[str, Any]]) -> None:
    if rows:
        await conn.execute(webhook_deliveries.insert(), rows)


async def delivery(
    conn: AsyncConnection, webhook_id: uuid.UUID, delivery_id: uuid.UUID
) -> RowMapping | None:
    query = select(webhook_deliveries).where(
        webhook_deliveries.c.id == delivery_id, webhook_deliveries.c.webhook_id == webhook_id
    )
    return (await conn.execute(query)).mappings().first()


async def deliveries_page(
    conn: AsyncConnection,
    webhook_id: uuid.UUID,
    before: uuid.UUID | None,
    limit: int,
    status: str | None = None,
    event_type: str | None = None,
) -> list[RowMapping]:
    """Newest first (ids are UUIDv7), of `status` and `event_type` when given."""
    query = (
        select(webhook_deliveries)
        .where(webhook_deliveries.c.webhook_id == webhook_id)
        .order_by(webhook_deliveries.c.id.desc())
        .limit(limit)
    )
    if before is not None:
        query = query.where(webhook_deliveries.c.id < before)
    if status is not None:
        query = query.where(webhook_deliveries.c.status == status)
    if event_type is not None:
        query = query.where(webhook_deliveries.c.event_type == event_type)
    return list((await conn.execute(query)).mappings())


async def attempts(conn: AsyncConnection, delivery_id: uuid.UUID) -> list[RowMapping]:
    """Every attempt of a delivery, newest first."""
    query = (
        select(webhook_delivery_attempts)
        .where(webhook_delivery_attempts.c.delivery_id == delivery_id)
        .order_by(webhook_delivery_attempts.c.id.desc())
    )
    return list((await conn.execute(query)).mappings())


async def insert_attempts(conn: AsyncConnection, rows: list[dict[str, Any]]) -> None:
    if rows:
        await conn.execute(webhook_delivery_attempts.insert(), rows)


async def claim(
    conn: AsyncConnection, now: datetime, lease_until: datetime, limit: int
) -> list[RowMapping]:
    """Due deliveries of enabled webhooks, each with its attempt counted and its next try put
    off until the lease ends (a worker that dies leaves it to be taken again then). Rows other
    transactions are claiming are skipped (SQLite: its writer claims alone)."""
    due = (
        select(webhook_deliveries.c.id)
        .join(webhooks, webhooks.c.id == webhook_deliveries.c.webhook_id)
        .where(
            webhook_deliveries.c.status == PENDING,
            webhook_deliveries.c.next_attempt_at <= now,
            webhooks.c.enabled.is_(True),
        )
        .order_by(webhook_deliveries.c.next_attempt_at)
        .limit(limit)
        .with_for_update(skip_locked=True, of=webhook_deliveries)
    )
    ids = list((await conn.execute(due)).scalars())
    if not ids:
        return []
    claimed = await conn.execute(
        update(webhook_deliveries)
        .where(webhook_deliveries.c.id.in_(ids))
        .values(attempts=webhook_deliveries.c.attempts + 1, next_attempt_at=lease_until)
        .returning(
            webhook_deliveries.c.id,
            webhook_deliveries.c.webhook_id,
            webhook_deliveries.c.event_id,
            webhook_deliveries.c.event_pos,
            webhook_deliveries.c.unit_left,
            webhook_deliveries.c.attempts,
        )
    )
    return list(claimed.mappings())


_RECORD = (
    update(webhook_deliveries)
    .where(
        webhook_deliveries.c.id == bindparam("delivery_id"),
        webhook_deliveries.c.attempts == bindparam("claimed"),
        webhook_deliveries.c.status == PENDING,
    )
    .values(
        status=bindparam("status"),
        next_attempt_at=bindparam("next_at"),
        last_attempt_at=bindparam("at"),
        last_status_code=bindparam("code"),
        last_error=bindparam("error"),
        last_duration_ms=bindparam("duration"),
        last_response=bindparam("response"),
    )
)


_DELIVERY_ID = bindparam("delivery_id", type_=Uuid())
_CLAIMED = bindparam("claimed", type_=Integer())
# The attempt's row, written only while its worker holds the claim (before _RECORD ends it).
_RECORD_ATTEMPT = webhook_delivery_attempts.insert().from_select(
    [
        "id",
        "delivery_id",
        "attempt",
        "attempted_at",
        "status_code",
        "duration_ms",
        "error",
        "response_body",
    ],
    select(
        bindparam("attempt_id", type_=Uuid()),
        _DELIVERY_ID,
        _CLAIMED,
        bindparam("at", type_=UTCDateTime()),
        bindparam("code", type_=Integer()),
        bindparam("duration", type_=Integer()),
        bindparam("error", type_=Text()),
        bindparam("response", type_=Text()),
    ).where(
        exists().where(
            webhook_deliveries.c.id == _DELIVERY_ID,
            webhook_deliveries.c.attempts == _CLAIMED,
            webhook_deliveries.c.status == PENDING,
        )
    ),
)


async def record(conn: AsyncConnection, results: list[dict[str, Any]]) -> None:
    """Attempt results: each attempt's row and its delivery's outcome, written only if its
    worker still holds the claim (the attempt count it claimed is still the row's, and the
    delivery is still pending)."""
    if results:
        await conn.execute(_RECORD_ATTEMPT, results)
        await conn.execute(_RECORD, results)


async def release(
    conn: AsyncConnection, claims: list[tuple[uuid.UUID, int]], now: datetime
) -> None:
    """Gives back claimed deliveries whose attempt was stopped before an answer (the process
    is stopping): due at once for another process, the attempt not counted; each only while
    its claim (the attempt count claimed) still holds."""
    if claims:
        await conn.execute(
            update(webhook_deliveries)
            .where(
                webhook_deliveries.c.id == _DELIVERY_ID,
                webhook_deliveries.c.attempts == _CLAIMED,
                webhook_deliveries.c.status == PENDING,
            )
            .values(attempts=webhook_deliveries.c.attempts - 1, next_attempt_at=now),
            [{"delivery_id": delivery, "claimed": claimed} for delivery, claimed in claims],
        )


async def fail_pending(conn: AsyncConnection, webhook_id: uuid.UUID, reason: str) -> None:
    await conn.execute(
        update(webhook_deliveries)
        .where(
            webhook_deliveries.c.webhook_id == webhook_id,
            webhook_deliveries.c.status == PENDING,
        )
        .values(status=FAILED, next_attempt_at=None, last_error=bound_error(reason))
    )
