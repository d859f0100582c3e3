"""SQL for display names."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.names.tables import display_names


async def every(conn: AsyncConnection, field: str | None = None) -> list[RowMapping]:
    query = select(display_names).order_by(display_names.c.field, display_names.c.value)
    if field is not None:
        query = query.where(display_names.c.field == field)
    return list((await conn.execute(query)).mappings())


async def one(conn: AsyncConnection, field: str, value: str) -> RowMapping | None:
    query = select(display_names).where(
        display_names.c.field == field, display_names.c.value == value
    )
    return (await conn.execute(query)).mappings().first()


async def count(conn: AsyncConnection) -> int:
    query = select(func.count()).select_from(display_names)
    return int((await conn.execute(query)).scalar_one())


async def put(
    conn: AsyncConnection, field: str, value: str, en: str, ar: str, at: datetime
) -> RowMapping:
    """Creates or replaces the entry; its `created_at` is `at` only when it was created."""
    insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    statement = insert(display_names).values(
        field=field, value=value, en=en, ar=ar, created_at=at, updated_at=at
    )
    upsert = statement.on_conflict_do_update(
        index_elements=[display_names.c.field, display_names.c.value],
        set_={"en": statement.excluded.en, "ar": statement.excluded.ar, "updated_at": at},
    ).returning(*display_names.c)
    return (await conn.execute(upsert)).mappings().one()


async def remove(conn: AsyncConnection, field: str, value: str) -> bool:
    result = await conn.execute(
        delete(display_names).where(display_names.c.field == field, display_names.c.value == value)
    )
    return result.rowcount > 0
