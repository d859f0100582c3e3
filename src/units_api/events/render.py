"""An event as the API shows it, rendered in Python (PostgreSQL renders its own pages in SQL,
`events/repository.py`), and the event by which a unit left a follower's policy or filter
(always rendered here: only a follower with a policy or filter is sent one)."""

from __future__ import annotations

from typing import Any

import orjson

from units_api.clock import format_time


def _head(row: Any) -> bytes:
    """The event's fields up to `actor`, as an object left open."""
    head = orjson.dumps(
        {
            "id": str(row.id),
            "type": row.type,
            "occurredAt": format_time(row.occurred_at),
            "unitId": None if row.unit_id is None else str(row.unit_id),
            "version": row.version,
        }
    )
    actor: str = row.actor
    return head[:-1] + b',"actor":' + actor.encode()


def render_event(row: Any) -> bytes:
    """The event as the API shows it; `actor` and `data` are stored as JSON and sent as is."""
    return b"".join((_head(row), b',"data":', row.data.encode(), b"}"))


def render_left(row: Any) -> bytes:
    """The event by which a unit left a follower's view: `"left": true`, and of its data
    only the unit's id (nothing of the unit as it is now, outside that view)."""
    unit_id = str(row.unit_id).encode()
    return b"".join((_head(row), b',"left":true,"data":{"unitId":"', unit_id, b'"}}'))
