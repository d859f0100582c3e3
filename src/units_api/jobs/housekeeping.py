"""Housekeeping, one step every HOUSEKEEPING_EVERY seconds: pruning events past their
retention (one process at a time), sweeping idempotency records past their window, deleting
job files past their expiry, dropping remembered query answers no request can be given any
more, deleting console sessions past their time, and removing temporary files left by job
processes that died."""

from __future__ import annotations

import asyncio
import logging

import orjson

from units_api.clock import utcnow
from units_api.console import sessions
from units_api.db import Database
from units_api.events.service import prune
from units_api.http.idempotency import Idempotency
from units_api.jobs import queue
from units_api.jobs.storage import Storage
from units_api.units import remembering

log = logging.getLogger(__name__)
BATCH = 200
HOUSEKEEPING_EVERY = 600.0
SCRATCH_KEPT_SECONDS = 24 * 3600.0


async def expire_files(db: Database, storage: Storage) -> int:
    """Delete the files of exports past their expiry, in transactions it opens itself; the
    jobs become `expired`."""
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


async def run_housekeeping(
    db: Database, retention_days: int, idempotency: Idempotency, storage: Storage
) -> None:
    """One round of housekeeping, each part in transactions of its own."""
    pruned = await prune(db, retention_days)
    swept = await idempotency.sweep()
    expired = await expire_files(db, storage)
    forgotten = await remembering.prune(db)
    async with db.transaction() as conn:
        signed_out = await sessions.sweep(conn)
    # A job's temporary file outlives it only if its process died; no job runs for a day
    # without touching its file.
    await asyncio.to_thread(storage.sweep_scratch, SCRATCH_KEPT_SECONDS)
    if pruned or swept or expired or forgotten or signed_out:
        log.info(
            "housekeeping",
            extra={
                "events": pruned,
                "idempotency": swept,
                "exports": expired,
                "answers": forgotten,
                "sessions": signed_out,
            },
        )
