"""Per-key rate limits: fixed windows, in process or shared through Redis."""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Protocol

from units_api.http.rates import Rate
from units_api.metrics import count_refusal

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    remaining: int
    reset: int


class Limiter(Protocol):
    async def hit(self, key: str, rate: Rate) -> Decision: ...

    async def close(self) -> None: ...


def _decide(count: int, rate: Rate, now: float) -> Decision:
    """The answer to the `count`-th request of its window; a refusal is counted in the
    metrics."""
    reset = max(1, math.ceil(rate.window - now % rate.window))
    if count > rate.quota:
        count_refusal()
    return Decision(count <= rate.quota, max(0, rate.quota - count), reset)


class MemoryLimiter:
    def __init__(self) -> None:
        self._windows: dict[str, tuple[int, int]] = {}

    async def hit(self, key: str, rate: Rate) -> Decision:
        now = time.time()
        window = int(now // rate.window)
        start, count = self._windows.get(key, (window, 0))
        count = count + 1 if start == window else 1
        self._windows[key] = (window, count)
        return _decide(count, rate, now)

    async def close(self) -> None:
        self._windows.clear()


class RedisLimiter:
    def __init__(self, url: str) -> None:
        from redis.asyncio import Redis

        self._redis = Redis.from_url(url)

    async def hit(self, key: str, rate: Rate) -> Decision:
        now = time.time()
        bucket = f"units-api:rl:{key}:{rate.window}:{int(now // rate.window)}"
        try:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.incr(bucket)
                pipe.expire(bucket, rate.window + 1)
                count, _ = await pipe.execute()
        except Exception:  # Redis down: serve rather than refuse everyone.
            log.warning("rate limiter unavailable; request let through", exc_info=True)
            return Decision(True, rate.quota, rate.window)
        return _decide(int(count), rate, now)

    async def close(self) -> None:
        await self._redis.aclose()


def create_limiter(redis_url: str | None) -> Limiter:
    return RedisLimiter(redis_url) if redis_url else MemoryLimiter()
