"""The change feed: pages read by position, a key's policy, retention."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.clock import utcnow
from units_api.db import Database
from units_api.errors import CursorExpired, InvalidParameter
from units_api.events import repository
from units_api.events.render import render_event
from units_api.events.types import EVENT_TYPES
from units_api.filters.evaluate import Predicate
from units_api.http.json import load_stored
from units_api.http.paging import Limit

FEED_LIMIT = Limit(default=100, maximum=1000)
# A key with a policy may skip many events that are not for it: a page scans at most this
# many pages' worth of events before it answers with what it found.
SCAN_PAGES = 10
PRUNE_BATCH = 10_000
_POSITION = re.compile(r"^[0-9]{1,18}$")


def parse_after(raw: str | None) -> int | None:
    if raw is None:
        return None
    if not _POSITION.match(raw):
        raise InvalidParameter("after", "must be a nextCursor of this feed")
    return int(raw)


def parse_types(raw: str | None) -> tuple[str, ...]:
    if raw is None:
        return ()
    names = tuple(dict.fromkeys(name.strip() for name in raw.split(",") if name.strip()))
    unknown = [name for name in names if name not in EVENT_TYPES]
    if unknown or not names:
        raise InvalidParameter("types", f"unknown event type(s): {', '.join(unknown) or raw!r}")
    return names


def event_unit(row: Row[Any] | Any) -> dict[str, Any] | None:
    """The unit an event carries (for a deletion, as it was), or None for a job event."""
    if row.unit_id is None:
        return None
    unit: dict[str, Any] = load_stored(row.data)["unit"]
    return unit


def admitted(row: Row[Any], admit: Predicate | None) -> bool:
    """Whether an event is for a caller whose policy is `admit` (None: every event); a job
    event is only for a caller without one."""
    if admit is None:
        return True
    unit = event_unit(row)
    return unit is not None and admit(unit)


async def read_feed(
    conn: AsyncConnection,
    after: int | None,
    limit: int,
    types: Sequence[str],
    admit: Predicate | None,
) -> bytes:
    """A page of the feed as the response body, once the caller has numbered what committed
    before it (`sequencer.sequence`, in transactions of its own). `admit`: the key's policy
    on an event's unit (job events are for keys without one)."""
    marks = await repository.positions(conn)
    head, pruned = marks["head"], marks["pruned"]
    if after is None:
        after = pruned
    elif after < pruned:
        raise CursorExpired(
            "Events after this cursor are no longer kept. Re-read the units (query or "
            "export), then follow the feed from its current end: "
            f"after={head}.",
            extra={"currentCursor": str(head)},
        )
    elif after > head:
        raise InvalidParameter("after", "is beyond the end of the feed")
    if admit is None and conn.dialect.name == "postgresql":
        count, last, events = await repository.rendered_page(conn, after, head, limit, types)
        return _body(events, last if count == limit else head)
    items: list[bytes] = []
    cursor = after
    for _ in range(SCAN_PAGES):
        asked = limit if admit is not None else limit - len(items)
        rows = await repository.page(conn, cursor, head, asked, types)
        for row in rows:
            cursor = row.pos
            if admitted(row, admit):
                items.append(render_event(row))
                if len(items) == limit:
                    break
        if len(items) == limit:
            break
        if len(rows) < asked:
            cursor = head
            break
    return _body(b",".join(items), cursor)


def _body(events: bytes, cursor: int) -> bytes:
    return b'{"data":[' + events + b'],"nextCursor":"' + str(cursor).encode() + b'"}'


async def prune(db: Database, retention_days: int) -> int:
    """Delete events older than the retention, oldest first, never past the webhooks' fan-out;
    one process at a time. How many were deleted."""
    cutoff = utcnow() - timedelta(days=retention_days)
    total = 0
    while True:
        async with db.transaction() as conn:
            pruned = await repository.lock_position(conn, "pruned", wait=False)
            if pruned is None:
                return total
            limit = (await repository.positions(conn))["webhooks"]
            through = pruned
            for pos, at in await repository.oldest(conn, pruned, PRUNE_BATCH):
                if at >= cutoff or pos > limit:
                    break
                through = pos
            if through == pruned:
                return total
            await repository.delete_through(conn, pruned, through)
            await repository.set_position(conn, "pruned", through)
        total += through - pruned
