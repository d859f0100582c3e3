"""SQL for units and their history."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import orjson
from sqlalchemy import ColumnElement, bindparam, delete, func, select, update
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.db import Database
from units_api.units.listing import SORTABLE, SortKey
from units_api.units.tables import unit_history, units

# Statements are built once and run with separate parameters: building them per call
# (`.values(**row)`) costs more than the round trip.
_INSERT_UNIT = units.insert()
_UPDATE_UNIT = update(units).where(units.c.id == bindparam("unit_id"))
_INSERT_HISTORY = unit_history.insert()


async def insert(conn: AsyncConnection, values: dict[str, Any]) -> None:
    await conn.execute(_INSERT_UNIT, values)


async def fetch_doc(
    conn: AsyncConnection, unit_id: uuid.UUID, condition: ColumnElement[bool] | None = None
) -> tuple[str, int] | None:
    query = select(units.c.doc, units.c.version).where(units.c.id == unit_id)
    if condition is not None:
        query = query.where(condition)
    row = (await conn.execute(query)).first()
    return None if row is None else (row[0], row[1])


_FETCH_DOC_SQL = "SELECT doc, version FROM units WHERE id = $1"


async def fetch_doc_fast(db: Database, unit_id: uuid.UUID) -> tuple[str, int] | None:
    """The record by id, on the fast pool where there is one."""
    if db.fast_pool is None:
        async with db.read() as conn:
            return await fetch_doc(conn, unit_id)
    async with db.fast_pool.acquire() as raw:
        row = await raw.fetchrow(_FETCH_DOC_SQL, unit_id)
    return None if row is None else (row[0], row[1])


async def fetch_for_update(
    conn: AsyncConnection, unit_id: uuid.UUID, condition: ColumnElement[bool] | None = None
) -> RowMapping | None:
    """The current record, locked until the transaction ends (SQLite holds the write lock)."""
    query = (
        select(units.c.doc, units.c.version, units.c.created_at, units.c.updated_at)
        .where(units.c.id == unit_id)
        .with_for_update()
    )
    if condition is not None:
        query = query.where(condition)
    return (await conn.execute(query)).mappings().first()


async def matches(
    conn: AsyncConnection, unit_id: uuid.UUID, condition: ColumnElement[bool]
) -> bool:
    """Whether the unit, as this transaction sees it, satisfies the condition."""
    query = select(units.c.id).where(units.c.id == unit_id, condition)
    return (await conn.execute(query)).first() is not None


async def update_row(conn: AsyncConnection, unit_id: uuid.UUID, values: dict[str, Any]) -> None:
    await conn.execute(_UPDATE_UNIT, {**values, "unit_id": unit_id})


async def delete_row(conn: AsyncConnection, unit_id: uuid.UUID) -> None:
    await conn.execute(delete(units).where(units.c.id == unit_id))


async def insert_history(conn: AsyncConnection, values: dict[str, Any]) -> None:
    await conn.execute(_INSERT_HISTORY, values)


async def history_page(
    conn: AsyncConnection, unit_id: uuid.UUID, before: int | None, limit: int
) -> list[RowMapping]:
    query = (
        select(unit_history)
        .where(unit_history.c.unit_id == unit_id)
        .order_by(unit_history.c.id.desc())
        .limit(limit)
    )
    if before is not None:
        query = query.where(unit_history.c.id < before)
    return list((await conn.execute(query)).mappings())


def _order_by(sort: Sequence[SortKey], dialect: str) -> list[Any]:
    """Null values sort last either way; text sorts by code point on both dialects."""
    clauses: list[Any] = []
    for key in sort:
        column: Any = units.c[SORTABLE[key.field]]
        if dialect == "postgresql" and key.field in ("name", "city", "type"):
            column = column.collate("C")
        clauses.append((column.desc() if key.descending else column.asc()).nulls_last())
    tie = units.c.id.desc() if sort[-1].descending else units.c.id.asc()
    return [*clauses, tie]


async def list_docs(
    conn: AsyncConnection,
    condition: ColumnElement[bool],
    sort: Sequence[SortKey],
    limit: int,
    offset: int,
) -> list[str]:
    query = (
        select(units.c.doc)
        .where(condition)
        .order_by(*_order_by(sort, conn.dialect.name))
        .limit(limit)
        .offset(offset)
    )
    return list((await conn.execute(query)).scalars())


async def count(conn: AsyncConnection, condition: ColumnElement[bool]) -> int:
    query = select(func.count()).select_from(units).where(condition)
    return int((await conn.execute(query)).scalar_one())


async def estimate(conn: AsyncConnection, condition: ColumnElement[bool]) -> int:
    """PostgreSQL's planner estimate of the matching rows (fast at any size)."""
    query = select(units.c.id).where(condition)
    compiled = query.compile(dialect=conn.dialect)
    names = compiled.positiontup or []
    parameters = tuple(compiled.params[name] for name in names)
    result = await conn.exec_driver_sql("EXPLAIN (FORMAT JSON) " + compiled.string, parameters)
    plan = result.scalar_one()
    plan = orjson.loads(plan) if isinstance(plan, str | bytes) else plan
    return int(plan[0]["Plan"]["Plan Rows"])
