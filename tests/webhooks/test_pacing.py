"""The worker's steps over new events under a stream of writes: at most one per
EVENTS_STEP_GAP, and none of the writes left without a step after it."""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest

from units_api.db import Database, create_engine
from units_api.webhooks import worker
from units_api.webhooks.sender import Sender

STREAM_SECONDS = 0.6


async def test_a_stream_of_wakeups_is_stepped_at_the_gap(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps: list[float] = []

    async def counted(db: Database) -> int:
        steps.append(time.monotonic())
        return 0

    monkeypatch.setattr(worker, "sequence", counted)
    db = Database(create_engine(sqlite_url, pool_size=2))
    sender = Sender(5, allow_private=True)
    wake, stop = asyncio.Event(), asyncio.Event()
    timing = worker.Timing(timeout=5)
    loop = asyncio.create_task(worker.run_forever(db, sender, timing, wake, 30, stop))
    try:
        await asyncio.sleep(0.2)  # the first step, at start
        started = len(steps)
        last_wake = 0.0
        deadline = time.monotonic() + STREAM_SECONDS
        while time.monotonic() < deadline:  # a commit every 5 ms
            wake.set()
            last_wake = time.monotonic()
            await asyncio.sleep(0.005)
        await asyncio.sleep(worker.EVENTS_STEP_GAP * 3)
        during = steps[started:]
        # ~120 wake-ups: stepped at most once per gap (and once more at the stream's end).
        assert 1 <= len(during) <= STREAM_SECONDS / worker.EVENTS_STEP_GAP + 2
        gaps = [later - earlier for earlier, later in itertools.pairwise(during)]
        assert all(gap >= worker.EVENTS_STEP_GAP * 0.9 for gap in gaps)
        assert during[-1] >= last_wake  # the last write was stepped over
        # A lone write after a quiet spell is stepped over at once.
        quiet = len(steps)
        wake.set()
        await asyncio.sleep(worker.EVENTS_STEP_GAP)
        assert len(steps) == quiet + 1
    finally:
        stop.set()
        await loop
        await sender.close()
        await db.dispose()
