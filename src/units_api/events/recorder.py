"""Events that are not a unit's change: a job's end (`export.succeeded`, `import.failed`...),
a channel's change (`channel.created`...).

Written in the transaction that ends the job or changes the channel, so the event exists
exactly when what it tells of does. Unit changes write their events through `units/changes.py`.
"""

from __future__ import annotations

from typing import Any

import orjson
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api import tracing
from units_api.clock import utcnow
from units_api.db import EVENTS_WRITTEN
from units_api.events.sequencer import take_positions
from units_api.events.tables import events
from units_api.events.types import NON_UNIT_EVENT_TYPES
from units_api.ids import uuid7


async def record_event(
    conn: AsyncConnection, event_type: str, data: bytes, actor: dict[str, Any]
) -> None:
    """Write an event without a unit (`data`: the job or channel as the API shows it) in
    `conn`'s transaction."""
    if event_type not in NON_UNIT_EVENT_TYPES:
        raise ValueError(f"{event_type} is not an event without a unit")
    values: dict[str, Any] = {
        "id": uuid7(),
        "type": event_type,
        "occurred_at": utcnow(),
        "unit_id": None,
        "version": None,
        "actor": orjson.dumps(actor).decode(),
        "data": data.decode(),
    }
    if tracing.on:
        values["trace_context"] = tracing.traceparent()
    await conn.execute(events.insert().values(**values))
    if conn.dialect.name == "sqlite":
        await take_positions(conn, 1)
    conn.info[EVENTS_WRITTEN] = True
