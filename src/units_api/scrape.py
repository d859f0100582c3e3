"""What a scrape of /metrics adds to the process's series (`metrics.py`): what the database
knows now (the delivery backlog and the age of its oldest, events awaiting a feed position,
jobs waiting and running), read at scrape time, the same from every server; a read that fails
leaves its series out of that scrape and is logged. And the pools' sampling, which keeps the
pool gauges of each serving process up to date.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api import metrics
from units_api.db import Database
from units_api.events import repository as events_repository
from units_api.jobs.tables import jobs
from units_api.webhooks.tables import webhook_deliveries as d

log = logging.getLogger(__name__)

# How long a scrape waits for its database reads, all together, before leaving out the series
# of those not read by then.
GAUGE_TIMEOUT = 5.0
# How often a process samples its connection pools.
POOL_SAMPLE_SECONDS = 1.0


def sample_pools(db: Database) -> None:
    """Record how many of `db`'s connections are in use now, and how many its pools keep."""
    pool: Any = db.engine.sync_engine.pool
    if hasattr(pool, "checkedout") and hasattr(pool, "size"):
        metrics.set_pool("main", pool.checkedout(), pool.size())
    fast = db.fast_pool
    if fast is not None:
        metrics.set_pool("fast", fast.get_size() - fast.get_idle_size(), fast.get_max_size())


async def watch_pools(db: Database, stop: asyncio.Event) -> None:
    """Sample `db`'s pools until `stop`."""
    while not stop.is_set():
        sample_pools(db)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), POOL_SAMPLE_SECONDS)


Family = Any  # prometheus_client.core.Metric
GaugeRead = Callable[[AsyncConnection, datetime], Awaitable[list[Family]]]


async def _delivery_backlog(conn: AsyncConnection, now: datetime) -> list[Family]:
    from prometheus_client.core import GaugeMetricFamily

    row = (
        await conn.execute(
            select(func.count(), func.min(d.c.created_at)).where(d.c.status == "pending")
        )
    ).one()
    oldest: datetime | None = row[1]
    return [
        GaugeMetricFamily(
            "units_api_webhook_deliveries_pending",
            "Webhook deliveries waiting for an attempt (a retry included).",
            value=row[0],
        ),
        GaugeMetricFamily(
            "units_api_webhook_oldest_pending_seconds",
            "Age of the oldest pending webhook delivery (0 when none is pending).",
            value=max(0.0, (now - oldest).total_seconds()) if oldest else 0.0,
        ),
    ]


async def _events_awaiting(conn: AsyncConnection, now: datetime) -> list[Family]:
    from prometheus_client.core import GaugeMetricFamily

    count = await events_repository.awaiting_position(conn)
    return [
        GaugeMetricFamily(
            "units_api_events_awaiting_position",
            "Committed events not yet given a feed position.",
            value=count,
        )
    ]


async def _jobs(conn: AsyncConnection, now: datetime) -> list[Family]:
    from prometheus_client.core import GaugeMetricFamily

    rows = await conn.execute(
        select(jobs.c.kind, jobs.c.status, func.count())
        .where(jobs.c.status.in_(("queued", "running")))
        .group_by(jobs.c.kind, jobs.c.status)
    )
    family = GaugeMetricFamily(
        "units_api_jobs", "Jobs waiting (queued) and running, by kind.", labels=("kind", "status")
    )
    for kind, status, count in rows:
        family.add_metric((kind, status), count)
    return [family]


DATABASE_GAUGES: dict[str, GaugeRead] = {
    "webhook delivery backlog": _delivery_backlog,
    "events awaiting a position": _events_awaiting,
    "jobs by status": _jobs,
}


async def _database_families(db: Database) -> list[Family]:
    now = datetime.now(UTC)
    # Read together, under one deadline: a scrape answers within GAUGE_TIMEOUT however many
    # of them hang, and one that hangs leaves the others their time.
    deadline = asyncio.get_running_loop().time() + GAUGE_TIMEOUT

    async def gauge(name: str, read: GaugeRead) -> list[Family]:
        try:
            async with asyncio.timeout_at(deadline), db.read() as conn:
                return await read(conn, now)
        except Exception as exc:
            log.warning(
                "a metric could not be read from the database; left out of this scrape",
                extra={"metric": name, "error": f"{type(exc).__name__}: {exc}"[:500]},
            )
            return []

    read = await asyncio.gather(*(gauge(name, each) for name, each in DATABASE_GAUGES.items()))
    return [family for families in read for family in families]


class _Fixed:
    """A collector of families already made."""

    def __init__(self, families: Iterable[Family]) -> None:
        self.families = list(families)

    def collect(self) -> Iterable[Family]:
        return self.families


async def scrape(db: Database) -> bytes:
    """The exposition: every process's series, and what the database knows now."""
    from prometheus_client import CollectorRegistry, generate_latest

    metrics.init()
    sample_pools(db)
    families = await _database_families(db)
    database = CollectorRegistry(auto_describe=False)
    database.register(_Fixed(families))
    return metrics.exposition() + generate_latest(database)
