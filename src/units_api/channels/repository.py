"""Every SQL read of channels."""

from __future__ import annotations

from sqlalchemy import RowMapping, select
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.channels.tables import channels


async def one(conn: AsyncConnection, name: str, lock: bool = False) -> RowMapping | None:
    query = select(channels).where(channels.c.name == name)
    if lock:
        query = query.with_for_update()
    return (await conn.execute(query)).mappings().first()


async def every(conn: AsyncConnection) -> list[RowMapping]:
    query = select(channels).order_by(channels.c.name)
    return list((await conn.execute(query)).mappings())


async def kinds(conn: AsyncConnection, share: bool = False) -> dict[str, str]:
    """Every channel's name and kind; `share`: locked against change until the transaction
    ends (PostgreSQL; SQLite's writer holds the whole database)."""
    query = select(channels.c.name, channels.c.kind)
    if share and conn.dialect.name == "postgresql":
        query = query.with_for_update(read=True)
    rows = await conn.execute(query)
    return {name: kind for name, kind in rows.all()}
