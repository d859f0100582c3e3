"""Every SQL read of the feeds: the units a feed may list, in batches by id, and what tells
whether a feed changed."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, LargeBinary, cast, func, select, true
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.clock import format_time, parse_time
from units_api.units.counting import CHANGE_VERSION
from units_api.units.tables import unit_history, units


def _utf8(dialect: str) -> ColumnElement[bytes]:
    """The stored document as its UTF-8 bytes: what the feed's JSON reader takes (neither the
    driver decodes it nor the reader encodes it again)."""
    if dialect == "postgresql":
        return func.convert_to(units.c.doc, "UTF8", type_=LargeBinary)
    return cast(units.c.doc, LargeBinary)


def _after(after: uuid.UUID | None) -> ColumnElement[bool]:
    return units.c.id > after if after is not None else true()


async def span_end(conn: AsyncConnection, after: uuid.UUID | None, size: int) -> uuid.UUID | None:
    """The id of the `size`-th unit after `after` (in id order, whatever its state), or None
    when fewer are left: a batch reads the units in between, one range of the primary key, so
    each read is short however few units are on the channel."""
    query = select(units.c.id).where(_after(after)).order_by(units.c.id)
    found = await conn.execute(query.offset(size - 1).limit(1))
    return found.scalar_one_or_none()


async def batch(
    conn: AsyncConnection,
    condition: ColumnElement[bool],
    after: uuid.UUID | None,
    upto: uuid.UUID | None,
) -> list[tuple[uuid.UUID, bytes]]:
    """The candidates after `after` up to `upto` (to the end: None), by id, with documents
    as UTF-8 bytes."""
    doc = _utf8(conn.dialect.name).label("doc")
    query = select(units.c.id, doc).where(condition, _after(after))
    if upto is not None:
        query = query.where(units.c.id <= upto)
    rows = await conn.execute(query.order_by(units.c.id))
    return [(row.id, row.doc) for row in rows]


@dataclass(frozen=True)
class Changes:
    """What a feed's validators are made of: the units' change version (every write to the
    table moves it) and when a unit was last written; of the sold units that may be listed,
    the sale that leaves a feed next and when the last one left."""

    version: int
    written: datetime | None
    next_leaving: datetime | None
    last_left: datetime | None


def _changed_at(dialect: str) -> ColumnElement[str]:
    if dialect == "postgresql":
        doc = cast(units.c.doc, JSONB)
        return func.jsonb_extract_path_text(doc, "availability", "changedAt")
    return func.json_extract(units.c.doc, "$.availability.changedAt")


async def changes(conn: AsyncConnection, cutoff: datetime) -> Changes:
    """`cutoff`: a sale before it has left every feed. A sale is never later than its unit's
    `updated_at`, so only units written since `cutoff` have their document read (a few); for
    older ones, their `updated_at` stands in for when their sale left (later than it, so never
    too early)."""
    sold = (units.c.publishing_status == "published") & (units.c.availability_status == "sold")
    latest = select(unit_history.c.at).order_by(unit_history.c.id.desc()).limit(1)
    head = await conn.execute(
        select(
            CHANGE_VERSION,
            latest.scalar_subquery(),
            select(func.max(units.c.updated_at)).scalar_subquery(),
            select(func.max(units.c.updated_at))
            .where(sold & (units.c.updated_at < cutoff))
            .scalar_subquery(),
        )
    )
    version, history_at, updated_at, old_sale = head.one()
    changed_at = _changed_at(conn.dialect.name)
    limit = format_time(cutoff)
    recent = select(changed_at.label("at")).where(sold & (units.c.updated_at >= cutoff)).subquery()
    sales = await conn.execute(
        select(
            func.min(recent.c.at).filter(recent.c.at >= limit),
            func.max(recent.c.at).filter(recent.c.at < limit),
        )
    )
    next_sale, left_sale = sales.one()
    written = max((time for time in (history_at, updated_at) if time is not None), default=None)
    left = [time for time in (old_sale, parse_time(left_sale)) if time is not None]
    return Changes(
        version=int(version),
        written=written,
        next_leaving=parse_time(next_sale),
        last_left=max(left, default=None),
    )
