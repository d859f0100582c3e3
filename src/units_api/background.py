"""A process's background work, started in one place: by the app's lifespan (`serve`) and by
`units-api worker`.

Always: announcing this process's events to workers elsewhere (`events/wakeup.py`,
PostgreSQL). With `listen` (UNITS_API_RUN_JOBS, and always in `worker`), each a loop of
`loop.py`:

- the unit schedule (`units/schedule.run_due`): scheduled publications, expired reservations;
- housekeeping (`run_housekeeping`, below);
- the search table's vacuum (`search/upkeep.vacuum_search`, PostgreSQL);
- the event worker (`webhooks/worker.run_forever`): feed numbering, fan-out, delivery;
- the job runner (`jobs/execution.JobRunner`): every kind in `job_kinds.JOB_KINDS`;
- with UNITS_API_INDEXNOW_KEY, IndexNow (`sitemaps/indexnow.run_forever`): changed pages sent
  to search engines.

A new periodic task is a step function (one round of work, in transactions it opens itself)
and one `_periodic` line in `start_background`.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from units_api import loop
from units_api.console import sessions
from units_api.context import AppContext
from units_api.db import Database, unbounded
from units_api.events.recorder import record_event
from units_api.events.service import prune
from units_api.events.wakeup import Wakeup
from units_api.http.idempotency import Idempotency
from units_api.job_kinds import JOB_KINDS
from units_api.jobs.execution import JobRunner, JobSetup
from units_api.jobs.housekeeping import expire_files, sweep_scratch
from units_api.jobs.storage import Storage
from units_api.search.upkeep import VACUUM_EVERY, vacuum_search
from units_api.sitemaps import indexnow
from units_api.units import remembering
from units_api.units.schedule import run_due
from units_api.webhooks import worker
from units_api.webhooks.service import Timing

log = logging.getLogger(__name__)
# How long a stopping process lets its loops finish the step they are in.
STOP_GRACE = 10.0
HOUSEKEEPING_EVERY = 600.0
# What the job runner, and each job's child process, runs jobs with.
JOBS = JobSetup(JOB_KINDS, record_event)


@dataclass(slots=True)
class Background:
    """Loops stop between steps when asked, so no transaction is cut in the middle; what
    still runs after STOP_GRACE is cancelled."""

    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def close(self) -> None:
        self.stop.set()
        if self.tasks:
            _, late = await asyncio.wait(self.tasks, timeout=STOP_GRACE)
            for task in late:
                task.cancel()
            await asyncio.gather(*self.tasks, return_exceptions=True)

    async def wait(self) -> None:
        await asyncio.gather(*self.tasks)


async def run_housekeeping(
    db: Database, retention_days: int, idempotency: Idempotency, storage: Storage
) -> None:
    """One round of housekeeping, each part in transactions of its own: pruning events past
    their retention (one process at a time), sweeping idempotency records past their window,
    deleting job files past their expiry, dropping remembered query answers no request can
    be given any more, deleting console sessions past their time, and removing temporary
    files left by job processes that died."""
    pruned = await prune(db, retention_days)
    swept = await idempotency.sweep()
    expired = await expire_files(db, storage)
    forgotten = await remembering.prune(db)
    async with db.transaction() as conn:
        signed_out = await sessions.sweep(conn)
    await sweep_scratch(storage)
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


def _periodic(
    name: str,
    every: float,
    work: Callable[[], Awaitable[Any]],
    stop: asyncio.Event,
    long: bool = False,
) -> asyncio.Task[None]:
    """A loop that runs `work` at start and then every `every` seconds; `long`: its
    statements may run past the database's bound for requests (`db.unbounded`)."""

    async def step() -> loop.Pause:
        await work()
        return loop.Pause(every)

    context = contextvars.copy_context()
    if long:
        context.run(unbounded)
    return asyncio.create_task(loop.run(name, step, stop, every), context=context)


def start_background(context: AppContext, listen: bool) -> Background:
    settings = context.settings
    background = Background()
    stop = background.stop
    wakeup = Wakeup(context.db)
    background.tasks.append(asyncio.create_task(wakeup.run(listen, stop)))
    if not listen:
        return background
    db = context.db
    timing = Timing(settings.webhook_timeout_seconds, settings.webhook_time_scale)
    background.tasks += [
        _periodic("schedule", settings.jobs_interval_seconds, lambda: run_due(db), stop),
        _periodic(
            "housekeeping",
            HOUSEKEEPING_EVERY,
            lambda: run_housekeeping(
                db, settings.events_retention_days, context.idempotency, context.storage
            ),
            stop,
            long=True,
        ),
        _periodic("vacuum", VACUUM_EVERY, lambda: vacuum_search(db), stop, long=True),
        asyncio.create_task(
            worker.run_forever(
                db, context.sender, timing, wakeup.event, settings.webhook_poll_seconds, stop
            )
        ),
        asyncio.create_task(JobRunner(db, settings, context.jobs_wake, JOBS).run_forever(stop)),
    ]
    if settings.indexnow_key:
        target = indexnow.Target(
            settings.public_base_url, settings.indexnow_key, settings.indexnow_endpoint
        )
        background.tasks.append(asyncio.create_task(indexnow.run_forever(db, target, stop)))
    return background
