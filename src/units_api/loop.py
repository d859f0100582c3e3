"""The one skeleton of a background loop: the scheduler, housekeeping, the event worker and
the job runner are each a step run by `run`.

A step does one round of work (in transactions it opens and ends itself) and returns how
long to wait before the next one (`Pause`: at most `seconds`, less if one of its `wakes` is
set first). The loop stops between steps when asked, never by cancelling a step under way;
a step that raises is logged (with the loop's name and how many steps in a row failed),
counted by the loop's name (`units_api_background_step_failures`), and tried again after a
pause that doubles with each failure in a row, from the loop's own `retry` up to
`max(retry, BACKOFF_LIMIT)`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from units_api import metrics

log = logging.getLogger(__name__)

# The longest pause after failures in a row (seconds), unless the loop's own retry is longer.
BACKOFF_LIMIT = 30.0


@dataclass(frozen=True, slots=True)
class Pause:
    seconds: float
    wakes: tuple[asyncio.Event, ...] = ()


Step = Callable[[], Awaitable[Pause]]


def backoff(retry: float, failures: int) -> float:
    """The pause after `failures` failed steps in a row."""
    return min(retry * 2.0 ** (failures - 1), max(retry, BACKOFF_LIMIT))


async def wait_any(events: Sequence[asyncio.Event], seconds: float) -> None:
    """Until one of `events` is set, or `seconds` have passed."""
    waiters = [asyncio.create_task(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


async def run(name: str, step: Step, stop: asyncio.Event, retry: float) -> None:
    """Run `step` until `stop` is set, pausing between steps as each one asks."""
    failures = 0
    while not stop.is_set():
        try:
            pause = await step()
        except Exception:
            failures += 1
            metrics.count_step_failure(name)
            log.exception(
                "background step failed; retrying",
                extra={"loop": name, "failures": failures},
            )
            pause = Pause(backoff(retry, failures))
        else:
            failures = 0
        await wait_any((stop, *pause.wakes), pause.seconds)
