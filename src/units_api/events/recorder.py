"""Events that are not a unit's change: a job's end (`export.succeeded`, `import.failed`...).

Written in the transaction that ends the job, so the event exists exactly when the job's end
does. Unit changes write their events through `units/changes.py`.
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
from units_api.events.types import JOB_EVENT_TYPES
from units_api.ids import uuid7


async def record_job_event(
    conn: AsyncConnection, event_type: str, data: bytes, actor: dict[str, Any]
) -> None:
    """Write a job event (`data`: the job as the API shows it) in `conn`'s transaction."""
    if event_type not in JOB_EVENT_TYPES:
        raise ValueError(f"{event_type} is not a job event type")
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
    if conn.dialect.name == "sqlite":
        values["pos"] = await take_positions(conn, 1)
    await conn.execute(events.insert().values(**values))
    conn.info[EVENTS_WRITTEN] = True
