"""The durable job queue on both databases: each job once, leases, takeover, fencing."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import update

from tests.conftest import Api
from units_api.clock import utcnow
from units_api.db import Database
from units_api.jobs import queue
from units_api.jobs.tables import jobs

LEASE = timedelta(seconds=60)


def a_kind() -> str:
    """A kind of this test's own, so other tests' jobs are never claimed here."""
    return "t" + uuid.uuid4().hex[:12]


async def expire_lease(api: Api, job_id: uuid.UUID) -> None:
    async with api.context.db.transaction() as conn:
        await conn.execute(
            update(jobs)
            .where(jobs.c.id == job_id)
            .values(lease_until=utcnow() - timedelta(seconds=1))
        )


async def succeed(db: Database, job: queue.Claim, **values: Any) -> None:
    """End a claimed job as succeeded, fenced on its lease (as a job's end writes it)."""
    async with db.transaction() as conn:
        await queue.record(
            conn,
            job,
            status=queue.SUCCEEDED,
            lease_owner=None,
            lease_until=None,
            finished_at=utcnow(),
            **values,
        )


async def test_concurrent_claimers_take_each_job_once(api: Api) -> None:
    kind = a_kind()
    db = api.context.db
    async with db.transaction() as conn:
        ids = {await queue.enqueue(conn, kind, {"n": n}) for n in range(20)}

    async def claimer(name: str) -> list[uuid.UUID]:
        taken = []
        while (job := await queue.claim(db, name, LEASE, (kind,))) is not None:
            taken.append(job.id)
            await succeed(db, job)
        return taken

    first, second = await asyncio.gather(claimer("a"), claimer("b"))
    assert sorted(first + second) == sorted(ids) and not set(first) & set(second)
    async with db.read() as conn:
        for job_id in ids:
            row = await queue.get(conn, job_id)
            assert row is not None and row["status"] == "succeeded" and row["attempts"] == 1


async def test_a_job_whose_lease_ran_out_is_taken_over_and_the_first_worker_is_fenced(
    api: Api,
) -> None:
    kind = a_kind()
    db = api.context.db
    async with db.transaction() as conn:
        job_id = await queue.enqueue(conn, kind, {"format": "csv"})
    first = await queue.claim(db, "first", LEASE, (kind,))
    assert first is not None and first.params == {"format": "csv"} and first.attempt == 1
    assert await queue.claim(db, "second", LEASE, (kind,)) is None  # leased
    async with db.transaction() as conn:
        await queue.record(conn, first, progress=0.5, checkpoint={"row": 1000})
    await expire_lease(api, job_id)

    second = await queue.claim(db, "second", LEASE, (kind,))
    assert second is not None and second.id == job_id and second.attempt == 2
    assert second.checkpoint == {"row": 1000}
    with pytest.raises(queue.LeaseLost):
        await queue.heartbeat(db, first, LEASE, progress=0.9)
    with pytest.raises(queue.LeaseLost):
        await succeed(db, first)
    await queue.heartbeat(db, second, LEASE, progress=0.7)
    await succeed(db, second, row_count=42)
    async with db.read() as conn:
        row = await queue.get(conn, job_id)
    assert row is not None
    assert (row["status"], row["row_count"], row["progress"]) == ("succeeded", 42, 0.7)
    assert row["lease_owner"] is None and row["finished_at"] is not None


async def test_a_job_taken_over_too_often_fails(api: Api) -> None:
    kind = a_kind()
    db = api.context.db
    async with db.transaction() as conn:
        job_id = await queue.enqueue(conn, kind, {}, max_attempts=2)
    for _ in range(2):
        job = await queue.claim(db, "w", LEASE, (kind,))
        assert job is not None
        await expire_lease(api, job_id)
    assert await queue.claim(db, "w", LEASE, (kind,)) is None
    async with db.read() as conn:
        row = await queue.get(conn, job_id)
    assert row is not None and row["status"] == "failed" and row["error"] == queue.WORKER_LOST
