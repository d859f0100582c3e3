"""The work a process runs beside its requests (or alone, as `units-api worker`)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from units_api.context import AppContext
from units_api.events.wakeup import Wakeup
from units_api.jobs import scheduler
from units_api.jobs.execution import JobRunner
from units_api.webhooks import worker
from units_api.webhooks.worker import Timing

# How long a stopping process lets its loops finish the step they are in.
STOP_GRACE = 10.0


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


def start_background(context: AppContext, listen: bool) -> Background:
    """Always: announcing this process's events to workers elsewhere (PostgreSQL). With
    `listen` (UNITS_API_RUN_JOBS): scheduled work and housekeeping, the event worker
    (numbering, fan-out, webhook delivery) and the job loop (exports, imports)."""
    settings = context.settings
    background = Background()
    wakeup = Wakeup(context.db)
    background.tasks.append(asyncio.create_task(wakeup.run(listen, background.stop)))
    if not listen:
        return background
    timing = Timing(settings.webhook_timeout_seconds, settings.webhook_time_scale)
    background.tasks += [
        asyncio.create_task(
            scheduler.run_forever(
                context.db,
                settings.jobs_interval_seconds,
                settings.events_retention_days,
                context.idempotency,
                context.storage,
                background.stop,
            )
        ),
        asyncio.create_task(
            worker.run_forever(
                context.db,
                context.sender,
                timing,
                wakeup.event,
                settings.webhook_poll_seconds,
                background.stop,
            )
        ),
        asyncio.create_task(
            JobRunner(context.db, settings, context.jobs_wake).run_forever(background.stop)
        ),
    ]
    return background
