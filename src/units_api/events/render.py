"""An event as the API shows it, rendered in Python (PostgreSQL renders its own pages in SQL,
`events/repository.py`)."""

from __future__ import annotations

from typing import Any

import orjson

from units_api.clock import format_time


def render_event(row: Any) -> bytes:
    """The event as the API shows it; `actor` and `data` are stored as JSON and sent as is."""
    head = orjson.dumps(
        {
            "id": str(row.id),
            "type": row.type,
            "occurredAt": format_time(row.occurred_at),
            "unitId": None if row.unit_id is None else str(row.unit_id),
            "version": row.version,
        }
    )
    return b"".join(
        (head[:-1], b',"actor":', row.actor.encode(), b',"data":', row.data.encode(), b"}")
    )
