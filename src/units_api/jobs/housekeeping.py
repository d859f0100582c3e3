"""The jobs' part of housekeeping (run with the rest by `background.run_housekeeping`):
deleting job files past their expiry, and removing temporary files left by job processes
that died."""

from __future__ import annotations

import asyncio

import orjson

from units_api.clock import utcnow
from units_api.db import Database
from units_api.jobs import queue
from units_api.jobs.storage import Storage

BATCH = 200
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


async def sweep_scratch(storage: Storage) -> None:
    """Remove the temporary files of job processes that died. A job's temporary file
    outlives it only if its process died; no job runs for a day without touching its file."""
    await asyncio.to_thread(storage.sweep_scratch, SCRATCH_KEPT_SECONDS)
