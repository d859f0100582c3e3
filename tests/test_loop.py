"""The background loops' skeleton (loop.py) and its failures in /metrics."""

from __future__ import annotations

import asyncio
import logging

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import Api
from units_api import loop


def test_failures_in_a_row_back_off_from_the_loops_retry() -> None:
    assert [loop.backoff(1.0, n) for n in (1, 2, 3)] == [1.0, 2.0, 4.0]
    assert loop.backoff(1.0, 50) == loop.BACKOFF_LIMIT
    assert loop.backoff(600.0, 3) == 600.0  # a retry longer than the limit stays as it is


async def test_a_loop_logs_failures_backs_off_and_wakes_early(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loop, "BACKOFF_LIMIT", 0.05)
    stop, wake = asyncio.Event(), asyncio.Event()
    calls: list[str] = []

    async def step() -> loop.Pause:
        calls.append("step")
        if len(calls) <= 2:
            raise RuntimeError("the database went away")
        if len(calls) == 4:
            stop.set()  # the loop ends after this step, not in it
        return loop.Pause(3600, (wake,))

    caplog.set_level(logging.ERROR, logger=loop.__name__)
    running = asyncio.create_task(loop.run("test", step, stop, 0.01))
    for _ in range(200):
        if len(calls) == 3:
            break
        await asyncio.sleep(0.01)
    assert len(calls) == 3  # two failures, each retried, then a step that waits an hour
    wake.set()  # ... and a wake-up cuts the wait short
    await asyncio.wait_for(running, 5)
    assert len(calls) == 4
    failures = [record for record in caplog.records if record.name == loop.__name__]
    assert [record.__dict__["failures"] for record in failures] == [1, 2]
    assert all(record.__dict__["loop"] == "test" and record.exc_info for record in failures)


async def _step_failures(api: Api, name: str) -> float:
    """The failed steps of loop `name`, as /metrics shows them."""
    text = (await api.client.get("/metrics")).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "units_api_background_step_failures_total" and sample.labels == {
                "loop": name
            }:
                return sample.value
    return 0.0


async def test_every_failed_step_is_counted_by_its_loop(api: Api) -> None:
    name = "failing"
    before = await _step_failures(api, name)
    stop = asyncio.Event()
    calls = 0

    async def step() -> loop.Pause:
        nonlocal calls
        calls += 1
        if calls <= 2:
            raise RuntimeError("the database went away")
        stop.set()
        return loop.Pause(0)

    await asyncio.wait_for(loop.run(name, step, stop, 0.001), 5)
    assert calls == 3
    assert await _step_failures(api, name) == before + 2
