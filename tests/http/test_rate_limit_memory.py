"""The in-process limiter keeps counting right and forgets windows that have ended."""

from __future__ import annotations

import asyncio

from units_api.http.ratelimit import MemoryLimiter
from units_api.http.rates import parse_rate


async def test_it_counts_per_key_and_drops_ended_windows() -> None:
    limiter = MemoryLimiter()
    limiter.SWEEP_EVERY = 5
    rate = parse_rate("2/second")
    decisions = [(await limiter.hit("a", rate)).allowed for _ in range(3)]
    assert decisions == [True, True, False]
    assert (await limiter.hit("b", rate)).allowed
    await asyncio.sleep(1.1)  # both windows end
    for key in ("c", "d", "e", "f"):
        assert (await limiter.hit(key, rate)).allowed  # the fifth new key sweeps
    assert "a" not in limiter._windows and "b" not in limiter._windows
    assert (await limiter.hit("a", rate)).allowed


def test_rates_parsed_once_are_kept_within_a_bound() -> None:
    # Keys' rates are checked as clients send them: many distinct texts keep little.
    for quota in range(1, 2_001):
        assert parse_rate(f"{quota}/minute").quota == quota
    assert parse_rate.cache_info().currsize <= 256
