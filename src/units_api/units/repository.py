"""SQL for units and their history."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from types import MappingProxyType
from typing import Any

from sqlalchemy import (
    ColumnElement,
    CompoundSelect,
    FromClause,
    Select,
    Subquery,
    TextClause,
    and_,
    bindparam,
    false,
    func,
    literal,
    literal_column,
    or_,
    select,
    text,
    true,
    union_all,
)
from sqlalchemy.dialects.postgresql import asyncpg as postgresql_asyncpg
from sqlalchemy.engine import Dialect, RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.clock import utcnow
from units_api.db import Connection, Database, UTCDateTime, driver_connection
from units_api.events.tables import event_positions, events, feed_positions
from units_api.inline_reads import Unread
from units_api.search.normalize import Words
from units_api.search.plan import Page
from units_api.search.rank import Tier, ranked_matches
from units_api.units.counting import CHANGE_VERSION
from units_api.units.fields import NOT_NULL_SORT_FIELDS, SORTABLE, TEXT_SORT_FIELDS, SortKey
from units_api.units.tables import unit_history, units

_FETCH_DOC_SQL = "SELECT doc, version FROM units WHERE id = $1"


async def fetch_doc(conn: Connection, unit_id: uuid.UUID) -> tuple[str, int] | None:
    """The record by id and its version; on a PlainConnection (`Database.fast_read`) by the
    driver alone."""
    if isinstance(conn, AsyncConnection):
        query = select(units.c.doc, units.c.version).where(units.c.id == unit_id)
        row = (await conn.execute(query)).first()
    else:
        driver = await driver_connection(conn, alone=True)
        row = await driver.fetchrow(_FETCH_DOC_SQL, unit_id)
    return None if row is None else (row[0], row[1])


_FETCH_VERSION_SQL = "SELECT version FROM units WHERE id = $1"


async def fetch_version(conn: Connection, unit_id: uuid.UUID) -> int | None:
    """A unit's version alone (its record is not read: what was made of that version may be
    kept), or None when there is no such unit."""
    if isinstance(conn, AsyncConnection):
        query = select(units.c.version).where(units.c.id == unit_id)
        found: int | None = (await conn.execute(query)).scalar_one_or_none()
        return found
    driver = await driver_connection(conn, alone=True)
    version: int | None = await driver.fetchval(_FETCH_VERSION_SQL, unit_id)
    return version


_CHANGE_VERSION_SQL = "SELECT coalesce(sum(changes), 0) FROM unit_counters"


async def fetch_change_version(conn: Connection) -> int:
    """The number that grows with every committed change of any unit (counting.CHANGE_VERSION):
    what was made of the units at one such number may be kept until it moves."""
    if isinstance(conn, AsyncConnection):
        return int((await conn.execute(select(CHANGE_VERSION))).scalar_one())
    driver = await driver_connection(conn, alone=True)
    return int(await driver.fetchval(_CHANGE_VERSION_SQL))


# A unit's current record: PostgreSQL's statement on the driver, SQLite's through SQLAlchemy,
# and SQLite's on the loop's thread (`inline_reads.py`), its values made by the columns' types.
_CURRENT_COLUMNS = (units.c.doc, units.c.version, units.c.created_at, units.c.updated_at)
_CURRENT_NAMES = tuple(column.name for column in _CURRENT_COLUMNS)
_CURRENT_SQL = "SELECT doc, version, created_at, updated_at FROM units WHERE id = $1"
_CURRENT_INLINE_SQL = _CURRENT_SQL.replace("$1", "?")
_CURRENT = select(*_CURRENT_COLUMNS).where(units.c.id == bindparam("unit_id"))


@cache
def _current_processors(dialect: Dialect) -> tuple[Any, list[Any]]:
    return units.c.id.type.dialect_impl(dialect).bind_processor(dialect), [
        column.type.dialect_impl(dialect).result_processor(dialect, None)
        for column in _CURRENT_COLUMNS
    ]


async def fetch_current_unlocked(db: Database, unit_id: uuid.UUID) -> Mapping[Any, Any] | None:
    """The current record, read without a lock and outside any transaction: on SQLite in a
    server process on the loop's thread (`Database.inline_reads`), otherwise on a connection
    of its own (`Database.fast_read`)."""
    reads = db.inline_reads
    if reads is not None:
        bind, results = _current_processors(db.engine.dialect)
        row = reads.first(_CURRENT_INLINE_SQL, (bind(unit_id) if bind else unit_id,))
        if row is None:
            return None
        if not isinstance(row, Unread):
            values = (
                made(value) if made else value for made, value in zip(results, row, strict=True)
            )
            return dict(zip(_CURRENT_NAMES, values, strict=True))
    async with db.fast_read() as conn:
        return await fetch_current(conn, unit_id, lock=False)


async def fetch_current(
    conn: Connection, unit_id: uuid.UUID, lock: bool = True
) -> Mapping[Any, Any] | None:
    """The current record; with `lock`, locked until the transaction ends (SQLite's writer
    holds its lock in any case)."""
    if not isinstance(conn, AsyncConnection) or conn.dialect.name == "postgresql":
        # The write that follows runs on the same connection (units.changes): one prepared
        # statement each, without the SQLAlchemy layer.
        driver = await driver_connection(conn, alone=not lock)
        sql = _CURRENT_SQL + " FOR UPDATE" if lock else _CURRENT_SQL
        return await driver.fetchrow(sql, unit_id)  # type: ignore[no-any-return]
    # SQLite: no row locks (its writer holds the database); the statement built once.
    return (await conn.execute(_CURRENT, {"unit_id": unit_id})).mappings().first()


_HISTORY_COLUMNS = "SELECT id, version, at, actor, action, changes FROM unit_history"
_HISTORY_SQL = f"{_HISTORY_COLUMNS} WHERE unit_id = $1 ORDER BY id DESC LIMIT $2"
_HISTORY_BEFORE_SQL = f"{_HISTORY_COLUMNS} WHERE unit_id = $1 AND id < $3 ORDER BY id DESC LIMIT $2"


async def history_page(
    conn: Connection, unit_id: uuid.UUID, before: int | None, limit: int
) -> Sequence[Mapping[Any, Any]]:
    """A page of a unit's history, newest first, older than the entry `before`; on a
    PlainConnection (`Database.fast_read`) by the driver alone."""
    if not isinstance(conn, AsyncConnection):
        driver = await driver_connection(conn, alone=True)
        if before is None:
            return await driver.fetch(_HISTORY_SQL, unit_id, limit)  # type: ignore[no-any-return]
        return await driver.fetch(_HISTORY_BEFORE_SQL, unit_id, limit, before)  # type: ignore[no-any-return]
    query = (
        select(unit_history)
        .where(unit_history.c.unit_id == unit_id)
        .order_by(unit_history.c.id.desc())
        .limit(limit)
    )
    if before is not None:
        query = query.where(unit_history.c.id < before)
    return list((await conn.execute(query)).mappings())


@dataclass(frozen=True, slots=True)
class Computed:
    """Sort keys that are not columns (units.fields.COMPUTED_SORTS): each one's expression,
    the rows it reads beside the units (`source`: units, or units joined to them), and the
    keys whose value a page adds to each record (`shown`: key, then the record's field)."""

    keys: Mapping[str, ColumnElement[Any]] = field(default_factory=lambda: MappingProxyType({}))
    source: FromClause = units
    shown: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


NOTHING_COMPUTED = Computed()


def sort_column(field: str, dialect: str, computed: Computed = NOTHING_COMPUTED) -> Any:
    """The column a sort key reads; text compares by code point on both dialects."""
    if field in computed.keys:
        return computed.keys[field]
    column: Any = units.c[SORTABLE[field]]
    if dialect == "postgresql" and field in TEXT_SORT_FIELDS:
        column = column.collate("C")
    return column


def _order_by(
    sort: Sequence[SortKey],
    dialect: str,
    computed: Computed,
    columns: Sequence[Any] | None = None,
    tie: Any = units.c.id,
) -> list[Any]:
    """Null values sort last either way; ties break on id in the last key's direction.
    `columns` and `tie`: where the sort values and the id are read, when not from the units.

    NOT NULL columns get no NULLS LAST, which would keep PostgreSQL off their indexes.
    """
    clauses: list[Any] = []
    for i, key in enumerate(sort):
        column = sort_column(key.field, dialect, computed) if columns is None else columns[i]
        ordered = column.desc() if key.descending else column.asc()
        not_null = key.field in NOT_NULL_SORT_FIELDS or key.field in computed.keys
        clauses.append(ordered if not_null else ordered.nulls_last())
    return [*clauses, tie.desc() if sort[-1].descending else tie.asc()]


def page_query(
    condition: ColumnElement[bool],
    sort: Sequence[SortKey],
    limit: int,
    offset: int,
    dialect: str,
    computed: Computed = NOTHING_COMPUTED,
    from_index: bool = False,
) -> Select[Any]:
    """A page of records with the change version they are read at, then the values of
    `computed.shown`.

    `from_index`: the page's ids and sort values are found first, then its records by id, so
    an index that holds every column the condition and the order read (map search's) finds
    the page without reading the table.
    """
    order = _order_by(sort, dialect, computed)
    if not from_index:
        shown = [sort_column(key, dialect, computed).label(key) for key in computed.shown]
        return (
            select(units.c.doc, CHANGE_VERSION, *shown)
            .select_from(computed.source)
            .where(condition)
            .order_by(*order)
            .limit(limit)
            .offset(offset)
        )
    values = [sort_column(key.field, dialect, computed).label(key.field) for key in sort]
    page = (
        select(units.c.id, *values)
        .select_from(computed.source)
        .where(condition)
        .order_by(*order)
        .limit(limit)
        .offset(offset)
        .subquery("page")
    )
    columns = [page.c[key.field] for key in sort]
    return (
        select(units.c.doc, CHANGE_VERSION, *(page.c[key] for key in computed.shown))
        .select_from(page.join(units, units.c.id == page.c.id))
        .order_by(*_order_by(sort, dialect, computed, columns, page.c.id))
    )


# Migration 0016's index of the points with their creation time (PostgreSQL, btree_gist).
LOCATED_BY_TIME = "ix_units_location_created_at"
# Times after (before) every unit's creation: the distance to one orders units by creation.
_LATEST = datetime(3000, 1, 1, tzinfo=UTC)
_EARLIEST = datetime(1000, 1, 1, tzinfo=UTC)
_TIME = UTCDateTime()


async def located_by_time(conn: AsyncConnection) -> bool:
    """Whether the database has LOCATED_BY_TIME, built and valid."""
    if conn.dialect.name != "postgresql":
        return False
    query = text("SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(:name)")
    return bool((await conn.execute(query, {"name": LOCATED_BY_TIME})).scalar())


def located_page_query(
    condition: ColumnElement[bool], descending: bool, limit: int, offset: int
) -> Select[Any]:
    """A page of a map search in creation order, as `page_query` gives it (created_at, then
    id, both one way), read through LOCATED_BY_TIME in two steps of one statement.

    A walk of the index nearest first to a time after every creation (`<->`: newest first;
    oldest first from a time before) finds `offset + limit` matches, and the earliest (latest)
    of their times: the matches created then or later (earlier) are few, hold the page, and
    are sorted exactly. The walk's order of times a few microseconds apart may be off (the
    index measures distances in float seconds), but the earliest time of ANY `offset + limit`
    matches is at or before the one the page's last row has, so the page is the same.
    """
    created = units.c.created_at
    located = and_(units.c.lng.is_not(None), condition)
    far = literal(_LATEST if descending else _EARLIEST, _TIME)
    walk = (
        select(created.label("created_at"))
        .where(located)
        .order_by(created.op("<->")(far))
        .limit(offset + limit)
        .subquery("walk")
    )
    reached = (func.min if descending else func.max)(walk.c.created_at)
    bound = select(reached).scalar_subquery()
    beyond = created >= bound if descending else created <= bound
    sort = (SortKey("createdAt", descending),)
    page = (
        select(units.c.id, created)
        .where(located, beyond)
        .order_by(*_order_by(sort, "postgresql", NOTHING_COMPUTED))
        .limit(limit)
        .offset(offset)
        .subquery("page")
    )
    order = _order_by(sort, "postgresql", NOTHING_COMPUTED, [page.c.created_at], page.c.id)
    return (
        select(units.c.doc, CHANGE_VERSION)
        .select_from(page.join(units, units.c.id == page.c.id))
        .order_by(*order)
    )


def hits_query(hits: Subquery, descending: bool) -> Select[Any]:
    """The records of a page of (unit_id, created_at) hits, in their order, with the version."""
    order = (
        (hits.c.created_at.desc(), hits.c.unit_id.desc())
        if descending
        else (hits.c.created_at, hits.c.unit_id)
    )
    return (
        select(units.c.doc, CHANGE_VERSION)
        .select_from(hits.join(units, units.c.id == hits.c.unit_id))
        .order_by(*order)
    )


async def ranked_page(
    conn: AsyncConnection,
    words: Words,
    tiers: list[tuple[Tier, bool]],
    descending: bool,
    limit: int,
    offset: int,
) -> Page:
    """A page of a search by relevance, from `offset` in the first of the `tiers` it falls
    in (search.rank.ranked_matches), as `read_page` gives it."""
    hits = ranked_matches(words, tiers, descending, limit, offset, conn.dialect.name, units)
    return await read_page(conn, ranked_hits_query(hits, descending))


def ranked_hits_query(hits: Subquery, descending: bool) -> Select[Any]:
    """The records of a page of (unit_id, created_at, score) hits, in their order (relevance,
    then creation, then id), with the version."""
    order = (hits.c.score, hits.c.created_at, hits.c.unit_id)
    return (
        select(units.c.doc, CHANGE_VERSION)
        .select_from(hits.join(units, units.c.id == hits.c.unit_id))
        .order_by(*(column.desc() if descending else column.asc() for column in order))
    )


@asynccontextmanager
async def custom_plans(conn: AsyncConnection) -> AsyncIterator[None]:
    """PostgreSQL plans each statement run inside for its own values. A prepared statement
    run often gets one generic plan, blind to its search words and limits: for a relevance
    tier that is a sort of every match (hundreds of milliseconds) instead of a walk to the
    page (under one). The service's reads run outside transactions, so it is set back by hand.
    SQLite plans every statement anew."""
    if conn.dialect.name != "postgresql":
        yield
        return
    await conn.exec_driver_sql("SET plan_cache_mode = force_custom_plan")
    try:
        yield
    finally:
        await conn.exec_driver_sql("RESET plan_cache_mode")


# Values a statement may have written into its text (literal_sql): never text, whose quoting
# would then be the only thing between a filter and the statement.
_LITERAL_VALUES = (int, float, datetime)
_POSTGRESQL = postgresql_asyncpg.dialect()  # type: ignore[no-untyped-call]
# The longest statement written in (a polygon of a few dozen vertices; the benchmark's
# pentagon makes 18 KB): each one is a statement PostgreSQL prepares and keeps per connection,
# and the list keeps its text (listing._statements), so a larger one keeps its parameters.
LITERAL_LIMIT = 32 * 1024


def literal_sql(query: Select[Any], dialect: str) -> str | None:
    """PostgreSQL: the statement with its values written in, when every one is a number (or
    a list of numbers, or a time) and it is at most LITERAL_LIMIT long; else None.

    A map search's page is a long statement (a polygon's bands, its edges): planning it took
    PostgreSQL about 1.1 ms of the page's 2.5 at 1,000,000 units, every time, as a prepared
    statement's values are planned for each run. Without parameters, a prepared statement
    keeps its one plan, made for these very values: the page then took 1.0 ms."""
    if dialect != "postgresql":
        return None
    compiled = query.compile(dialect=_POSTGRESQL)
    for value in compiled.params.values():
        items = value if isinstance(value, list | tuple) else (value,)
        if not all(isinstance(item, _LITERAL_VALUES) for item in items):
            return None
    sql = str(query.compile(dialect=_POSTGRESQL, compile_kwargs={"literal_binds": True}))
    return sql if len(sql) <= LITERAL_LIMIT else None


async def read_page(conn: AsyncConnection, query: Select[Any], sql: str | None = None) -> Page:
    """The records of a page query, the change version they were read at (None for none),
    and each record's values of the keys it shows; `sql`: the query as literal_sql gave it."""
    if sql is None:
        rows = (await conn.execute(query)).all()
    else:
        rows = (await conn.exec_driver_sql(sql)).all()
    version = int(rows[0][1]) if rows else None
    return [row[0] for row in rows], version, [tuple(row[2:]) for row in rows]


def keyset_after(
    sort: Sequence[SortKey],
    values: Sequence[Any],
    last_id: uuid.UUID,
    dialect: str,
    computed: Computed = NOTHING_COMPUTED,
) -> ColumnElement[bool]:
    """Rows strictly after (values, last_id) in the order `_order_by` gives (nulls last)."""
    keys = [
        (sort_column(key.field, dialect, computed), key.descending, value)
        for key, value in zip(sort, values, strict=True)
    ]
    keys.append((units.c.id, sort[-1].descending, last_id))
    branches: list[ColumnElement[bool]] = []
    equal: list[ColumnElement[bool]] = []
    for column, descending, value in keys:
        if value is not None:
            beyond = column < value if descending else column > value
            branches.append(and_(*equal, or_(beyond, column.is_(None))))
            equal.append(column == value)
        else:
            equal.append(column.is_(None))
    return or_(*branches)


async def keyset_page(
    conn: AsyncConnection,
    condition: ColumnElement[bool],
    sort: Sequence[SortKey],
    limit: int,
    computed: Computed = NOTHING_COMPUTED,
    from_index: bool = False,
) -> list[RowMapping]:
    """Records with their id and sort values (`k0`, `k1`...); `from_index` as in
    `page_query`."""
    dialect = conn.dialect.name
    columns = [
        sort_column(key.field, dialect, computed).label(f"k{i}") for i, key in enumerate(sort)
    ]
    query = (
        select(units.c.id, *columns) if from_index else select(units.c.doc, units.c.id, *columns)
    )
    query = (
        query.select_from(computed.source)
        .where(condition)
        .order_by(*_order_by(sort, dialect, computed))
        .limit(limit)
    )
    if from_index:
        page = query.subquery("page")
        values = [page.c[f"k{i}"] for i in range(len(sort))]
        query = (
            select(units.c.doc, page)
            .select_from(page.join(units, units.c.id == page.c.id))
            .order_by(*_order_by(sort, dialect, computed, values, page.c.id))
        )
    return list((await conn.execute(query)).mappings())


async def aggregate(
    conn: AsyncConnection,
    condition: ColumnElement[bool],
    groups: Sequence[tuple[str, str]],
    measures: Sequence[tuple[str, Any]],
    limit: int,
) -> tuple[int, list[tuple[Any, ...]]]:
    """The change version and the rows (group values, then measures), read in one statement:
    the version's single row joined to the groups, so that no group still reads it."""
    group_columns = [units.c[column].label(f"g{i}") for i, (_, column) in enumerate(groups)]
    measured = [expr.label(f"m{i}") for i, (_, expr) in enumerate(measures)]
    query = (
        select(literal_column("1").label("found"), *group_columns, *measured)
        .where(condition)
        .limit(limit)
    )
    if group_columns:
        query = query.group_by(*(units.c[column] for _, column in groups)).order_by(
            *(units.c[column].asc().nulls_last() for _, column in groups)
        )
    rows = query.subquery("found")
    version = select(CHANGE_VERSION.label("version")).subquery("version")
    read = (
        select(version.c.version, rows)
        .select_from(version.outerjoin(rows, true()))
        .order_by(*(rows.c[f"g{i}"].asc().nulls_last() for i in range(len(groups))))
    )
    result = (await conn.execute(read)).all()
    return int(result[0][0]), [tuple(row[2:]) for row in result if row[1] is not None]


async def due(
    conn: AsyncConnection, status_column: str, time_column: str, status: str, limit: int
) -> list[uuid.UUID]:
    """Units whose scheduled time has come, locked; rows another worker holds are skipped."""
    time = units.c[time_column]
    query = (
        select(units.c.id)
        .where(units.c[status_column] == status, time <= utcnow())
        .order_by(time)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    return list((await conn.execute(query)).scalars())


# Made once: a statement built for each call cost a bulk update of ten units 4 % of its time.
_MANY_FOR_UPDATE = (
    select(units.c.id, *_CURRENT_COLUMNS)
    .where(units.c.id.in_(bindparam("unit_ids", expanding=True)))
    .order_by(units.c.id)
    .with_for_update()
)


async def fetch_many_for_update(
    conn: AsyncConnection, unit_ids: Sequence[uuid.UUID], condition: ColumnElement[bool] | None
) -> dict[uuid.UUID, RowMapping]:
    """The current records of many units, locked, keyed by id (unseen ids are absent)."""
    query = _MANY_FOR_UPDATE if condition is None else _MANY_FOR_UPDATE.where(condition)
    result = await conn.execute(query, {"unit_ids": list(unit_ids)})
    return {row["id"]: row for row in result.mappings()}


async def matching_ids(
    conn: AsyncConnection, condition: ColumnElement[bool], limit: int
) -> list[uuid.UUID]:
    query = select(units.c.id).where(condition).order_by(units.c.id).limit(limit)
    return list((await conn.execute(query)).scalars())


async def outside(
    conn: AsyncConnection, unit_ids: Sequence[uuid.UUID], condition: ColumnElement[bool]
) -> set[uuid.UUID]:
    """Which of these units do not satisfy the condition (as this transaction sees them)."""
    query = select(units.c.id).where(units.c.id.in_(unit_ids), ~condition)
    return set((await conn.execute(query)).scalars())


def _carrying(dialect: str) -> TextClause:
    if dialect == "postgresql":
        return text(
            "(units.doc::jsonb -> 'publishing' -> 'channels') "
            "@> jsonb_build_array(CAST(:channel AS text))"
        )
    return text(
        "EXISTS (SELECT 1 FROM json_each(units.doc, '$.publishing.channels') AS c "
        "WHERE c.value = :channel)"
    )


async def carrying_channel(conn: AsyncConnection, name: str, limit: int) -> list[uuid.UUID]:
    """Up to `limit` units whose `publishing.channels` names `name`."""
    condition = _carrying(conn.dialect.name).bindparams(channel=name)
    query = select(units.c.id).where(condition).order_by(units.c.id).limit(limit)
    return list((await conn.execute(query)).scalars())


# The dashboards' copy (units/dashboards.py): what changed, and the columns it holds by id.


@dataclass(frozen=True, slots=True)
class FeedChanges:
    """Read in one statement, hence from one snapshot: the change version, the feed's head
    and pruned positions, and the events naming a unit past a position or not numbered yet
    (committed, but the sequencer has not reached them), as (seq, unit, numbered). Every
    change the version counts has its event among them or at or before the position, and
    every event among them is of a change it counts."""

    version: int
    head: int
    pruned: int
    events: list[tuple[int, uuid.UUID, bool]]


def _position(name: str) -> Any:
    return select(feed_positions.c.pos).where(feed_positions.c.name == name).scalar_subquery()


async def feed_changes(conn: AsyncConnection, after: int, cap: int) -> FeedChanges:
    """What changed past the feed position `after`; at most `cap` + 1 events."""
    named = events.c.unit_id.is_not(None)
    past = (
        select(events.c.seq, events.c.unit_id, true().label("numbered"))
        .select_from(event_positions.join(events, events.c.seq == event_positions.c.seq))
        .where(event_positions.c.pos > after, named)
    )
    if conn.dialect.name == "postgresql":
        # Committed events the sequencer has not reached: past its watermark, without a
        # position (one lookup in the positions' index each, as `events/sequencer.py` does).
        # SQLite numbers events as they are written.
        numbered = select(event_positions.c.seq).where(event_positions.c.seq == events.c.seq)
        pending = select(events.c.seq, events.c.unit_id, false().label("numbered")).where(
            events.c.seq > func.coalesce(_position("settled"), 0),
            numbered.scalar_subquery().is_(None),
            named,
        )
        wanted: Select[Any] | CompoundSelect[Any] = union_all(past, pending)
    else:
        wanted = past
    found = wanted.limit(cap + 1).subquery("found")
    marks = select(
        CHANGE_VERSION.label("version"),
        _position("head").label("head"),
        func.coalesce(_position("pruned"), 0).label("pruned"),
    ).subquery("marks")
    query = select(marks, found).select_from(marks.outerjoin(found, true()))
    rows = (await conn.execute(query)).all()
    version, head, pruned = (int(value) for value in rows[0][:3])
    changed = [(int(row[3]), row[4], bool(row[5])) for row in rows if row[3] is not None]
    return FeedChanges(version, head, pruned, changed)


_COPIED_COLUMNS = (
    units.c.id,
    units.c.city,
    units.c.type,
    units.c.sub_project_id,
    units.c.publishing_status,
    units.c.availability_status,
    units.c.bedrooms,
    units.c.price,
    units.c.surface,
)


async def copied_after(
    conn: AsyncConnection, after: uuid.UUID | None, limit: int
) -> Sequence[tuple[Any, ...]]:
    """The copied columns of up to `limit` units past `after` in id order (a page of a load)."""
    query = select(*_COPIED_COLUMNS).order_by(units.c.id).limit(limit)
    if after is not None:
        query = query.where(units.c.id > after)
    return (await conn.execute(query)).all()


async def copied_of(
    conn: AsyncConnection, unit_ids: Sequence[uuid.UUID]
) -> Sequence[tuple[Any, ...]]:
    """The copied columns of these units as they are now (a deleted unit has no row)."""
    query = select(*_COPIED_COLUMNS).where(units.c.id.in_(unit_ids))
    return (await conn.execute(query)).all()


async def orders_text_by_code_point(conn: AsyncConnection) -> bool:
    """Whether the database orders the units' text columns by code point, as the copy does
    (SQLite always; PostgreSQL under the C collation)."""
    if conn.dialect.name == "sqlite":
        return True
    query = text("SELECT 'B' < 'a' AND 'a' < 'b' AND 'Z' < '_' AND '_' < 'a'")
    return bool((await conn.execute(query)).scalar_one())
