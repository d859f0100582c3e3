"""Every SQL statement of the sitemaps and IndexNow: the walk of published units by id, the
live units' pages, and IndexNow's row (its only writer)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, RowMapping, Select, func, literal_column, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.clock import format_time
from units_api.sitemaps.tables import indexnow_state
from units_api.units.counting import CHANGE_VERSION
from units_api.units.tables import units

# PostgreSQL walks the partial index `ix_units_published_id` (migration 0025), whose predicate
# this repeats. SQLite's planner would rather read `ix_units_publishing_status` and sort every
# published unit for each page: the `+` keeps it off that index, so it walks the primary key.
_PUBLISHED = {
    "postgresql": text("units.publishing_status = 'published'"),
    "sqlite": text("+units.publishing_status = 'published'"),
}


def _published(conn: AsyncConnection, *columns: Any) -> Select[Any]:
    """Published units in id order."""
    return select(*columns).where(_PUBLISHED[conn.dialect.name]).order_by(units.c.id)


async def change_version(conn: AsyncConnection) -> int:
    """A number that grows with every committed change of a unit."""
    return int((await conn.execute(select(CHANGE_VERSION))).scalar_one())


async def boundary(
    conn: AsyncConnection, after: uuid.UUID | None, count: int
) -> tuple[uuid.UUID | None, bool]:
    """The id of the `count`-th published unit after `after` (None: from the first), and
    whether any published unit comes after that one."""
    query = _published(conn, units.c.id).offset(count - 1).limit(2)
    if after is not None:
        query = query.where(units.c.id > after)
    found = list((await conn.execute(query)).scalars())
    return (found[0] if found else None), len(found) > 1


async def any_published_after(conn: AsyncConnection, after: uuid.UUID) -> bool:
    query = _published(conn, units.c.id).where(units.c.id > after).limit(1)
    return (await conn.execute(query)).first() is not None


# When a unit last changed as the API writes it (clock.format_time), written by PostgreSQL: a
# sitemap of 1,000,000 units spent a fifth of its time formatting them in Python.
_CHANGED_TEXT = func.to_char(
    func.timezone("UTC", units.c.updated_at), literal_column('\'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"\'')
)


async def published_page(
    conn: AsyncConnection,
    live: ColumnElement[bool],
    after: uuid.UUID | None,
    upto: uuid.UUID | None,
    limit: int,
) -> list[tuple[uuid.UUID, str, bool]]:
    """Published units by id, after `after` up to `upto` (inclusive; None: to the end): their
    ids, when they last changed (as the API writes it), and whether they meet `live`."""
    postgresql = conn.dialect.name == "postgresql"
    changed = _CHANGED_TEXT if postgresql else units.c.updated_at
    query = _published(conn, units.c.id, changed, live.label("live")).limit(limit)
    if after is not None:
        query = query.where(units.c.id > after)
    if upto is not None:
        query = query.where(units.c.id <= upto)
    rows = await conn.execute(query)
    if postgresql:
        return [(row[0], row[1], bool(row[2])) for row in rows]
    return [(row[0], format_time(row[1]) or "", bool(row[2])) for row in rows]


# IndexNow's row: held by one process at a time.

STATE_ID = 1
_STATE = indexnow_state.c


async def claim(
    conn: AsyncConnection, owner: uuid.UUID, now: datetime, until: datetime
) -> RowMapping | None:
    """IndexNow's row, held by `owner` until `until`, if no other process holds it now."""
    free = (_STATE.owner.is_(None)) | (_STATE.owner == owner) | (_STATE.lease_until < now)
    statement = (
        update(indexnow_state)
        .where(_STATE.id == STATE_ID, free)
        .values(owner=owner, lease_until=until)
        .returning(*indexnow_state.c)
    )
    return (await conn.execute(statement)).mappings().first()


async def state(conn: AsyncConnection) -> RowMapping:
    query = select(indexnow_state).where(_STATE.id == STATE_ID)
    return (await conn.execute(query)).mappings().one()


async def save(conn: AsyncConnection, owner: uuid.UUID, **values: Any) -> bool:
    """Write IndexNow's progress, if `owner` still holds the row."""
    statement = (
        update(indexnow_state).where(_STATE.id == STATE_ID, _STATE.owner == owner).values(**values)
    )
    return (await conn.execute(statement)).rowcount == 1


async def release(conn: AsyncConnection, owner: uuid.UUID) -> None:
    statement = (
        update(indexnow_state)
        .where(_STATE.id == STATE_ID, _STATE.owner == owner)
        .values(owner=None, lease_until=None)
    )
    await conn.execute(statement)
