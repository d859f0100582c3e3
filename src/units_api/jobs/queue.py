"""The durable job queue: a job is a row, claimed by one worker at a time under a lease.

A claim takes the oldest queued job that is due, or a running job whose lease has run out
(its worker died), with FOR UPDATE SKIP LOCKED (SQLite: its single writer), and counts the
attempt. The worker renews its lease with heartbeats; every write it makes about the job is
fenced on (owner, attempt): a worker that lost its lease changes nothing, and learns so
(`LeaseLost`). A job taken over more than `max_attempts` times is failed.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import orjson
from sqlalchemy import and_, or_, select, update
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.clock import utcnow
from units_api.db import Database
from units_api.errors import bound_error
from units_api.ids import uuid7
from units_api.jobs.tables import jobs

QUEUED, RUNNING, SUCCEEDED, FAILED, EXPIRED = (
    "queued",
    "running",
    "succeeded",
    "failed",
    "expired",
)
MAX_ATTEMPTS = 3
WORKER_LOST = "The job's worker stopped before it finished, too many times."


# Told of a job failed for being taken over too often, its row as failed, in the claim's
# transaction: its event is written there (jobs.execution.job_lost).
Lost = Callable[[AsyncConnection, RowMapping], Awaitable[None]]


class LeaseLost(Exception):
    """The job was taken over by another worker (or finished): stop working on it."""


@dataclass(frozen=True, slots=True)
class Claim:
    id: uuid.UUID
    kind: str
    params: dict[str, Any]
    attempt: int
    owner: str
    checkpoint: dict[str, Any] | None
    max_attempts: int = MAX_ATTEMPTS


async def enqueue(
    conn: AsyncConnection,
    kind: str,
    params: dict[str, Any],
    owner_key_id: uuid.UUID | None = None,
    max_attempts: int = MAX_ATTEMPTS,
    job_id: uuid.UUID | None = None,
) -> uuid.UUID:
    job_id = job_id or uuid7()
    now = utcnow()
    await conn.execute(
        jobs.insert().values(
            id=job_id,
            kind=kind,
            status=QUEUED,
            params=orjson.dumps(params).decode(),
            owner_key_id=owner_key_id,
            progress=0.0,
            attempts=0,
            max_attempts=max_attempts,
            run_after=now,
            created_at=now,
        )
    )
    return job_id


def _claimable(now: datetime) -> Any:
    return or_(
        and_(jobs.c.status == QUEUED, jobs.c.run_after <= now),
        and_(jobs.c.status == RUNNING, jobs.c.lease_until < now),
    )


async def claim(
    db: Database,
    owner: str,
    lease: timedelta,
    kinds: tuple[str, ...] | None = None,
    lost: Lost | None = None,
) -> Claim | None:
    """The next job for `owner`, leased for `lease`; None when there is none. A job taken
    over `max_attempts` times is failed on the way, and `lost` told of it."""
    while True:
        async with db.transaction() as conn:
            now = utcnow()
            query = select(jobs).where(_claimable(now)).order_by(jobs.c.created_at).limit(1)
            if kinds is not None:
                query = query.where(jobs.c.kind.in_(kinds))
            row = (await conn.execute(query.with_for_update(skip_locked=True))).mappings().first()
            if row is None:
                return None
            if row["attempts"] >= row["max_attempts"]:
                await _fail_lost(conn, row, now)
                failed = await get(conn, row["id"])
                if lost is not None and failed is not None:
                    await lost(conn, failed)
                continue
            attempt = row["attempts"] + 1
            await conn.execute(
                update(jobs)
                .where(jobs.c.id == row["id"])
                .values(
                    status=RUNNING,
                    attempts=attempt,
                    lease_owner=owner,
                    lease_until=now + lease,
                    started_at=row["started_at"] or now,
                )
            )
        checkpoint = orjson.loads(row["checkpoint"]) if row["checkpoint"] else None
        return Claim(
            row["id"],
            row["kind"],
            orjson.loads(row["params"]),
            attempt,
            owner,
            checkpoint,
            row["max_attempts"],
        )


async def _fail_lost(conn: AsyncConnection, row: RowMapping, now: datetime) -> None:
    await conn.execute(
        update(jobs)
        .where(jobs.c.id == row["id"])
        .values(
            status=FAILED, error=WORKER_LOST, lease_owner=None, lease_until=None, finished_at=now
        )
    )


def _fenced(job: Claim) -> Any:
    return and_(
        jobs.c.id == job.id,
        jobs.c.status == RUNNING,
        jobs.c.lease_owner == job.owner,
        jobs.c.attempts == job.attempt,
    )


async def record(conn: AsyncConnection, job: Claim, **values: Any) -> None:
    """Write on the job in `conn`'s transaction (progress, a checkpoint committed with the work
    it describes...), only while `job` still holds its lease; LeaseLost otherwise."""
    if "checkpoint" in values and values["checkpoint"] is not None:
        values["checkpoint"] = orjson.dumps(values["checkpoint"]).decode()
    if values.get("error") is not None:
        values["error"] = bound_error(values["error"])
    result = await conn.execute(update(jobs).where(_fenced(job)).values(**values))
    if result.rowcount != 1:
        raise LeaseLost(str(job.id))


async def heartbeat(db: Database, job: Claim, lease: timedelta, **values: Any) -> None:
    """Renew the lease (and write `values`, e.g. progress); LeaseLost if it was lost."""
    async with db.transaction() as conn:
        await record(conn, job, lease_until=utcnow() + lease, **values)


async def release(db: Database, job: Claim, delay: timedelta = timedelta(0)) -> None:
    """Give the job back to the queue (its worker stops), to be claimed again after `delay`;
    LeaseLost if it was not held any more."""
    async with db.transaction() as conn:
        await record(
            conn, job, status=QUEUED, lease_owner=None, lease_until=None, run_after=utcnow() + delay
        )


async def expired_files(conn: AsyncConnection, now: datetime, limit: int) -> list[RowMapping]:
    """Succeeded jobs whose file has passed its expiry, locked (skipping those another
    process is expiring)."""
    query = (
        select(jobs)
        .where(jobs.c.status == SUCCEEDED, jobs.c.expires_at < now)
        .order_by(jobs.c.expires_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    return list((await conn.execute(query)).mappings())


async def mark_expired(conn: AsyncConnection, job_id: uuid.UUID) -> None:
    await conn.execute(
        update(jobs).where(jobs.c.id == job_id, jobs.c.status == SUCCEEDED).values(status=EXPIRED)
    )


async def get(conn: AsyncConnection, job_id: uuid.UUID) -> RowMapping | None:
    return (await conn.execute(select(jobs).where(jobs.c.id == job_id))).mappings().first()
