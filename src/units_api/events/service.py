"""The change feed: pages read by position, a key's policy, retention."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final, Literal

from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.clock import format_time, utcnow
from units_api.db import Database
from units_api.errors import CursorExpired, InvalidParameter
from units_api.events import repository
from units_api.events.render import render_event, render_left
from units_api.events.types import EVENT_TYPES
from units_api.filters.evaluate import Predicate
from units_api.filters.tree import Node, comparisons
from units_api.http.json import load_stored
from units_api.http.paging import Limit
from units_api.units.filtering import UNIT_CATALOGUE, unit_predicate

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


# How an event reaches a follower with a policy or filter: whole, as the event by which its
# unit left (`render.render_left`), or not at all (None).
WHOLE: Final = "whole"
LEFT: Final = "left"
Verdict = Literal["whole", "left"] | None
# When units were changed before some of their versions: (unit id, version) -> its time.
Times = Mapping[tuple[uuid.UUID, int], datetime]


# Every change moves these: a view that reads one judges the unit before every change.
_EVERY_CHANGE = frozenset({"updatedAt", "version"})


@dataclass(frozen=True, slots=True)
class View:
    """What a key's policy or a webhook's filter lets its follower see of the feed."""

    admit: Predicate
    # The unit's fields it reads (the top level of the document): a change of none of them
    # cannot take a unit out of it.
    reads: frozenset[str]

    @classmethod
    def of(cls, node: Node) -> View:
        admit = unit_predicate(node)  # first: it refuses a selector that names no field
        fields = [UNIT_CATALOGUE.fields[found.selector] for found in comparisons(node)]
        return cls(admit, frozenset((f.array or f.path)[0] for f in fields))

    @property
    def dated(self) -> bool:
        """It reads `updatedAt`: a unit's time before a change is not in the change's event,
        and is read from the unit's history."""
        return "updatedAt" in self.reads

    def may_leave(self, changes: dict[str, Any]) -> bool:
        return not self.reads.isdisjoint(changes) or not self.reads.isdisjoint(_EVERY_CHANGE)


def unit_before(
    unit: dict[str, Any], changes: dict[str, Any], changed_at: datetime | None = None
) -> dict[str, Any]:
    """The unit as it was before a change, from the unit after it and the change's diff (every
    field that changed, with its value before; a state machine's as a whole): one version
    earlier, last changed at `changed_at` when it is known."""
    before = {**unit, **{name: change["from"] for name, change in changes.items()}}
    before["version"] = unit["version"] - 1
    if changed_at is not None:
        before["updatedAt"] = format_time(changed_at)
    return before


def judge(row: Row[Any] | Any, view: View | None, times: Times | None = None) -> Verdict:
    """How an event reaches a follower whose policy or filter is `view` (None: every event,
    whole). An event whose unit is inside is seen whole (a deletion: judged on the unit as it
    was); one whose unit was inside before the change and is outside after is seen as its
    unit leaving; a job event is only for a follower without one. `times`: `times_before`
    of the events, for a view that reads `updatedAt`."""
    if view is None:
        return WHOLE
    if row.unit_id is None:
        return None
    stored = load_stored(row.data)
    unit: dict[str, Any] = stored["unit"]
    if view.admit(unit):
        return WHOLE
    changes = stored.get("changes")
    if not changes or not view.may_leave(changes):
        return None
    changed_at = times.get((row.unit_id, row.version - 1)) if times else None
    return LEFT if view.admit(unit_before(unit, changes, changed_at)) else None


async def times_before(
    conn: AsyncConnection, views: Iterable[View | None], rows: Sequence[Any]
) -> Times:
    """When the units of these events were changed before them (their history), if one of
    the views reads `updatedAt`; else nothing is read."""
    if not any(view is not None and view.dated for view in views):
        return {}
    wanted = [(row.unit_id, row.version - 1) for row in rows if (row.version or 0) > 1]
    return await repository.times_before(conn, wanted)


async def read_feed(
    conn: AsyncConnection,
    after: int | None,
    limit: int,
    types: Sequence[str],
    view: View | None,
) -> bytes:
    """A page of the feed as the response body, once the caller has numbered what committed
    before it (`sequencer.sequence`, in transactions of its own). `view`: the key's policy
    (see `judge`)."""
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
    if view is None and conn.dialect.name == "postgresql":
        count, last, events = await repository.rendered_page(conn, after, head, limit, types)
        return _body(events, last if count == limit else head)
    items: list[bytes] = []
    cursor = after
    for _ in range(SCAN_PAGES):
        asked = limit if view is not None else limit - len(items)
        rows = await repository.page(conn, cursor, head, asked, types)
        times = await times_before(conn, [view], rows)
        for row in rows:
            cursor = row.pos
            verdict = judge(row, view, times)
            if verdict is not None:
                items.append(render_left(row) if verdict == LEFT else render_event(row))
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
