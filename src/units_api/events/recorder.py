"""Writing outbox events inside the caller's transaction."""

from __future__ import annotations

import uuid
from typing import Any

import orjson
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.db import utcnow, uuid7
from units_api.events.tables import events
from units_api.http.json import dumps

_INSERT_EVENT = events.insert()


async def record_event(
    conn: AsyncConnection,
    event_type: str,
    *,
    unit_id: uuid.UUID | None,
    version: int | None,
    actor: dict[str, Any],
    data: dict[str, Any],
) -> None:
    row = {"type": event_type, "unit_id": unit_id, "version": version, "actor": actor, "data": data}
    await record_events(conn, [row])


async def record_events(conn: AsyncConnection, rows: list[dict[str, Any]]) -> None:
    """Many events at once; each row has type, unit_id, version, actor (dict) and data."""
    if not rows:
        return
    now = utcnow()
    await conn.execute(
        _INSERT_EVENT,
        [
            {
                "id": uuid7(),
                "type": row["type"],
                "occurred_at": now,
                "unit_id": row["unit_id"],
                "version": row["version"],
                "actor": orjson.dumps(row["actor"]).decode(),
                "data": dumps(row["data"]).decode(),
            }
            for row in rows
        ],
    )
