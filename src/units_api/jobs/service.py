"""Jobs as the API shows them: who may see which, and how one is rendered."""

from __future__ import annotations

import uuid
from datetime import UTC
from typing import Any

import orjson
from sqlalchemy import select
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.clock import format_time, utcnow
from units_api.errors import NotFound, bound_error
from units_api.http.paging import UUID, Keyset
from units_api.jobs.kinds import JobKind
from units_api.jobs.queue import EXPIRED, SUCCEEDED
from units_api.jobs.tables import jobs

JOBS_KEYSET = Keyset("jobs", (UUID,))


def render(row: RowMapping, kind: JobKind) -> dict[str, Any]:
    """The job as the API shows it: the fields every job has, then `kind`'s own."""
    params = orjson.loads(row["params"])
    result = orjson.loads(row["result"]) if row["result"] else {}
    job: dict[str, Any] = {
        "id": str(row["id"]),
        "kind": row["kind"],
        "status": _status(row),
        "format": params["format"],
        "progress": row["progress"],
        "rowCount": row["row_count"],
        "bytes": row["bytes"],
        "createdAt": format_time(row["created_at"]),
        "startedAt": format_time(row["started_at"]),
        "finishedAt": format_time(row["finished_at"]),
        "expiresAt": format_time(row["expires_at"]),
        "error": bound_error(row["error"]),
    }
    job.update(kind.fields(params, result))
    return job


def _status(row: RowMapping) -> str:
    """The job's status as of now: an export whose file's time has passed is `expired` at
    once, though the sweep deletes its file later."""
    expires_at = row["expires_at"]
    if row["status"] == SUCCEEDED and expires_at is not None:
        if expires_at.tzinfo is None:
            expires_at = expires_at.replace(tzinfo=UTC)
        if expires_at <= utcnow():
            return EXPIRED
    return str(row["status"])


def _visible(owner_key_id: uuid.UUID | None) -> Any:
    """Jobs an API key may see: its own; every job for an admin (`owner_key_id` None)."""
    return True if owner_key_id is None else jobs.c.owner_key_id == owner_key_id


async def get(
    conn: AsyncConnection, job_id: uuid.UUID, owner_key_id: uuid.UUID | None, kind: str
) -> RowMapping:
    query = select(jobs).where(jobs.c.id == job_id, jobs.c.kind == kind, _visible(owner_key_id))
    row = (await conn.execute(query)).mappings().first()
    if row is None:
        raise NotFound(f"No job {job_id}.")
    return row


async def list_page(
    conn: AsyncConnection,
    kind: JobKind,
    owner_key_id: uuid.UUID | None,
    limit: int,
    cursor: str | None,
) -> dict[str, Any]:
    """A page of jobs of one kind, newest first."""
    before = JOBS_KEYSET.decode(cursor)
    query = select(jobs).where(jobs.c.kind == kind.name, _visible(owner_key_id))
    if before:
        query = query.where(jobs.c.id < before[0])
    rows = (await conn.execute(query.order_by(jobs.c.id.desc()).limit(limit + 1))).mappings()
    shown, next_cursor = JOBS_KEYSET.page(list(rows), limit, lambda row: (row["id"],))
    return {"data": [render(row, kind) for row in shown], "nextCursor": next_cursor}
