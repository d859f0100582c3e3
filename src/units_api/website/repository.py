"""Every SQL read of the website beside the units' own: a deleted unit's last record."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.events.tables import events
from units_api.http.json import load_stored


async def deleted_unit(conn: AsyncConnection, unit_id: uuid.UUID) -> dict[str, Any] | None:
    """The unit as it was when deleted, while its event is kept; else None."""
    query = (
        select(events.c.data)
        .where(events.c.type == "unit.deleted", events.c.unit_id == unit_id)
        .limit(1)
    )
    data = (await conn.execute(query)).scalar_one_or_none()
    if data is None:
        return None
    unit: dict[str, Any] = load_stored(data)["unit"]
    return unit
