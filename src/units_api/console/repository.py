"""SQL for console sessions."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.console.tables import console_sessions


async def insert(conn: AsyncConnection, values: dict[str, Any]) -> None:
    await conn.execute(console_sessions.insert().values(**values))


async def by_id(conn: AsyncConnection, session_id: str) -> RowMapping | None:
    query = select(console_sessions).where(console_sessions.c.id == session_id)
    return (await conn.execute(query)).mappings().first()


async def remove(conn: AsyncConnection, session_id: str) -> None:
    await conn.execute(delete(console_sessions).where(console_sessions.c.id == session_id))


async def remove_expired(conn: AsyncConnection, now: datetime) -> int:
    result = await conn.execute(
        delete(console_sessions).where(console_sessions.c.expires_at <= now)
    )
    return int(result.rowcount or 0)
