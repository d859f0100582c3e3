"""Every SQL statement of the change feed: its positions, its pages, its pruning."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, tuple_, update
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.db import driver_connection
from units_api.events.render import render_event, render_left
from units_api.events.tables import events, feed_positions
from units_api.units.tables import unit_history

_PAGE_COLUMNS = (
    events.c.pos,
    events.c.id,
    events.c.type,
    events.c.occurred_at,
    events.c.unit_id,
    events.c.version,
    events.c.actor,
    events.c.data,
)


async def positions(conn: AsyncConnection) -> dict[str, int]:
    """The feed's named positions: head, pruned, webhooks."""
    rows = await conn.execute(select(feed_positions.c.name, feed_positions.c.pos))
    return {name: int(pos) for name, pos in rows}


async def lock_position(conn: AsyncConnection, name: str, wait: bool = True) -> int | None:
    """A named position, locked until the transaction ends; None if another transaction holds
    it and `wait` is false (SQLite's writer holds every lock)."""
    query = select(feed_positions.c.pos).where(feed_positions.c.name == name)
    query = query.with_for_update(skip_locked=not wait)
    found = (await conn.execute(query)).scalar_one_or_none()
    return None if found is None else int(found)


async def set_position(conn: AsyncConnection, name: str, pos: int) -> None:
    await conn.execute(update(feed_positions).where(feed_positions.c.name == name).values(pos=pos))


async def page(
    conn: AsyncConnection, after: int, upto: int, limit: int, types: Sequence[str] = ()
) -> Sequence[Any]:
    """Events at positions after `after` up to `upto`, in feed order."""
    query = (
        select(*_PAGE_COLUMNS)
        .where(events.c.pos > after, events.c.pos <= upto)
        .order_by(events.c.pos)
        .limit(limit)
    )
    if types:
        query = query.where(events.c.type.in_(types))
    return (await conn.execute(query)).all()


async def oldest(conn: AsyncConnection, after: int, limit: int) -> list[tuple[int, datetime]]:
    """The first events after `after` in feed order: their positions and times."""
    query = (
        select(events.c.pos, events.c.occurred_at)
        .where(events.c.pos > after)
        .order_by(events.c.pos)
        .limit(limit)
    )
    return [(int(pos), at) for pos, at in await conn.execute(query)]


async def delete_through(conn: AsyncConnection, after: int, through: int) -> None:
    await conn.execute(delete(events).where(events.c.pos > after, events.c.pos <= through))


async def at(conn: AsyncConnection, where: Sequence[int]) -> Sequence[Any]:
    """The events at these positions (those still kept)."""
    return (await conn.execute(select(*_PAGE_COLUMNS).where(events.c.pos.in_(where)))).all()


# PostgreSQL renders events itself, as the API shows them (a page of 1,000 events is several
# megabytes: Python then only joins them). SQLite's are rendered in Python (`render.py`).
# ruff: noqa: S608 (built once from constants; every value is a parameter)
_RENDERED = """concat('{"id":"', id, '","type":"', type, '","occurredAt":"',
    to_char(occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
    '","unitId":', coalesce('"' || unit_id || '"', 'null'),
    ',"version":', coalesce(version::text, 'null'),
    ',"actor":', actor, ',"data":', data, '}')"""
_RENDERED_PAGE = f"""
SELECT pos, {_RENDERED} FROM events
WHERE pos > $1 AND pos <= $2 AND ($4::text[] IS NULL OR type = ANY($4::text[]))
ORDER BY pos LIMIT $3
"""
_RENDERED_AT = f"SELECT pos, {_RENDERED} FROM events WHERE pos = ANY($1::bigint[])"


async def rendered_page(
    conn: AsyncConnection, after: int, upto: int, limit: int, types: Sequence[str] = ()
) -> tuple[int, int, bytes]:
    """PostgreSQL: how many events a page holds, the last one's position (`after` if none),
    and the events as JSON, joined with commas."""
    driver = await driver_connection(conn, alone=True)
    rows = await driver.fetch(_RENDERED_PAGE, after, upto, limit, list(types) or None)
    last = rows[-1][0] if rows else after
    return len(rows), last, ",".join(row[1] for row in rows).encode()


async def rendered_at(conn: AsyncConnection, where: Sequence[int]) -> dict[int, bytes]:
    """The events at these positions (those still kept), as the API shows them."""
    if not where:
        return {}
    if conn.dialect.name == "postgresql":
        driver = await driver_connection(conn)
        return {pos: text.encode() for pos, text in await driver.fetch(_RENDERED_AT, where)}
    return {row.pos: render_event(row) for row in await at(conn, where)}


async def rendered_left_at(conn: AsyncConnection, where: Sequence[int]) -> dict[int, bytes]:
    """The events at these positions (those still kept), each as the event by which its unit
    left a follower's view (`render.render_left`)."""
    if not where:
        return {}
    return {row.pos: render_left(row) for row in await at(conn, where)}


async def times_before(
    conn: AsyncConnection, wanted: Sequence[tuple[uuid.UUID, int]]
) -> dict[tuple[uuid.UUID, int], datetime]:
    """When these versions of units were written, by (unit id, version), from their history
    (kept after a unit is deleted)."""
    if not wanted:
        return {}
    history = unit_history.c
    query = select(history.unit_id, history.version, history.at).where(
        tuple_(history.unit_id, history.version).in_(wanted)
    )
    return {(unit_id, version): at for unit_id, version, at in await conn.execute(query)}


async def trace_contexts_at(conn: AsyncConnection, where: Sequence[int]) -> dict[int, str]:
    """The trace contexts kept with the events at these positions (`tracing.py`), by
    position; events written with tracing off have none."""
    query = select(events.c.pos, events.c.trace_context).where(
        events.c.pos.in_(where), events.c.trace_context.is_not(None)
    )
    return {int(pos): str(found) for pos, found in await conn.execute(query)}
