"""SQL for API keys."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.auth.tables import api_keys


async def insert(conn: AsyncConnection, values: dict[str, Any]) -> None:
    await conn.execute(api_keys.insert().values(**values))


async def by_hash(conn: AsyncConnection, secret_hash: str) -> RowMapping | None:
    result = await conn.execute(select(api_keys).where(api_keys.c.secret_hash == secret_hash))
    return result.mappings().first()


async def by_id(conn: AsyncConnection, key_id: uuid.UUID) -> RowMapping | None:
    result = await conn.execute(select(api_keys).where(api_keys.c.id == key_id))
    return result.mappings().first()


async def page(conn: AsyncConnection, after: uuid.UUID | None, limit: int) -> list[RowMapping]:
    query = select(api_keys).order_by(api_keys.c.id).limit(limit)
    if after is not None:
        query = query.where(api_keys.c.id > after)
    return list((await conn.execute(query)).mappings())


async def revoke(conn: AsyncConnection, key_id: uuid.UUID, at: datetime) -> None:
    await conn.execute(
        update(api_keys)
        .where(api_keys.c.id == key_id, api_keys.c.revoked_at.is_(None))
        .values(revoked_at=at)
    )


async def touch(conn: AsyncConnection, key_id: uuid.UUID, at: datetime) -> None:
    await conn.execute(update(api_keys).where(api_keys.c.id == key_id).values(last_used_at=at))


async def count_usable(conn: AsyncConnection) -> int:
    query = select(func.count()).select_from(api_keys).where(api_keys.c.revoked_at.is_(None))
    return int((await conn.execute(query)).scalar_one())
