"""The unit schedule's step: scheduled publications that are due, and reservations that have
expired.

The schedule is durable in the unit rows themselves (`scheduled_at`, `reserved_until`), so a
worker that was down catches up when it starts. Rows are claimed with FOR UPDATE SKIP LOCKED
and re-checked under the lock, so several workers on one PostgreSQL act on each unit once.
"""

from __future__ import annotations

import logging

from units_api.db import Database
from units_api.units import availability, publishing, repository
from units_api.units.service import SystemCaller

log = logging.getLogger(__name__)
SCHEDULER = SystemCaller("scheduler")
BATCH = 200


async def run_due(db: Database) -> int:
    """Publish what is due and release what has expired, in transactions of up to BATCH units
    it opens itself; returns how many units moved."""
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
    if moved:
        log.info("scheduled work done", extra={"units": moved})
    return moved
