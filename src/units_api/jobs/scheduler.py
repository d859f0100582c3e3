"""Time-driven work: scheduled publications and expired reservations, and housekeeping
(pruning events past their retention, one process at a time; sweeping idempotency records
past their window; deleting export files past their expiry; dropping remembered query
answers no request can be given any more).

The schedule is durable in the unit rows themselves (`scheduled_at`, `reserved_until`), so a
worker that was down catches up when it starts. Rows are claimed with FOR UPDATE SKIP LOCKED
and re-checked under the lock, so several workers on one PostgreSQL act on each unit once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import orjson

from units_api.clock import utcnow
from units_api.db import Database
from units_api.events.service import prune
from units_api.http.idempotency import Idempotency
from units_api.jobs import queue
from units_api.jobs.storage import Storage
from units_api.units import availability, publishing, remembering, repository
from units_api.units.service import SystemCaller

log = logging.getLogger(__name__)
SCHEDULER = SystemCaller("scheduler")
BATCH = 200
HOUSEKEEPING_EVERY = 600.0
SCRATCH_KEPT_SECONDS = 24 * 3600.0


async def run_due(db: Database) -> int:
    """Publish what is due and release what has expired; returns how many units moved."""
    moved = 0
    for status_column, time_column, status, move in (
        ("publishing_status", "scheduled_at", "scheduled", publishing.publish_due),
        ("availability_status", "reserved_until", "reserved", availability.release_expired),
    ):
        while True:
            async with db.transaction() as conn:
                ids = await repository.due(conn, status_column, time_column, status, BATCH)
                for unit_id in ids:
                    moved += await move(conn, unit_id, SCHEDULER)
            if len(ids) < BATCH:
                break
    return moved


async def expire_files(db: Database, storage: Storage) -> int:
    """Delete the files of exports past their expiry; the jobs become `expired`."""
    expired = 0
    while True:
        async with db.transaction() as conn:
            rows = await queue.expired_files(conn, utcnow(), BATCH)
            for row in rows:
                result = orjson.loads(row["result"] or "{}")
                if "file" in result:
                    await storage.delete(result["file"])
                await queue.mark_expired(conn, row["id"])
        expired += len(rows)
        if len(rows) < BATCH:
            return expired


async def run_forever(
    db: Database,
    interval: float,
    retention_days: int,
    idempotency: Idempotency,
    storage: Storage,
    stop: asyncio.Event,
) -> None:
    """Until `stop`: do what is due, then wait `interval` seconds; housekeeping at start and
    every HOUSEKEEPING_EVERY seconds."""
    housekept = -HOUSEKEEPING_EVERY
    while not stop.is_set():
        try:
            moved = await run_due(db)
            if moved:
                log.info("scheduled work done", extra={"units": moved})
            if time.monotonic() - housekept >= HOUSEKEEPING_EVERY:
                housekept = time.monotonic()
                pruned = await prune(db, retention_days)
                swept = await idempotency.sweep()
                expired = await expire_files(db, storage)
                forgotten = await remembering.prune(db)
                # A job's temporary file outlives it only if its process died; no job runs
                # for a day without touching its file.
                await asyncio.to_thread(storage.sweep_scratch, SCRATCH_KEPT_SECONDS)
                if pruned or swept or expired or forgotten:
                    log.info(
                        "housekeeping",
                        extra={
                            "events": pruned,
                            "idempotency": swept,
                            "exports": expired,
                            "answers": forgotten,
                        },
                    )
        except Exception:
            log.exception("scheduled work failed; retrying")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval)
