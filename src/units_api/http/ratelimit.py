"""Per-key rate limits: fixed windows, in process or shared through Redis."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from units_api.http.rates import Rate
from units_api.metrics import count_refusal
from units_api.redis_link import RedisLink, Unavailable

if TYPE_CHECKING:
    from redis.asyncio import Redis


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
    """Windows counted in this process. Keys seen once (a public page's client addresses) do
    not pile up: every SWEEP_EVERY new keys, the windows that have ended are dropped."""

    SWEEP_EVERY = 10_000

    def __init__(self) -> None:
        self._windows: dict[str, tuple[int, int, float]] = {}  # window, count, its end
        self._new = 0

    async def hit(self, key: str, rate: Rate) -> Decision:
        now = time.time()
        window = int(now // rate.window)
        start, count, _ = self._windows.get(key, (window, 0, 0.0))
        if key not in self._windows:
            self._new += 1
            if self._new >= self.SWEEP_EVERY:
                self._sweep(now)
        count = count + 1 if start == window else 1
        self._windows[key] = (window, count, (window + 1) * rate.window)
        return _decide(count, rate, now)

    def _sweep(self, now: float) -> None:
        self._new = 0
        self._windows = {k: v for k, v in self._windows.items() if v[2] > now}

    async def close(self) -> None:
        self._windows.clear()


class RedisLimiter:
    """Windows counted in Redis, shared by every process; while Redis is lost, each process
    counts alone (`MemoryLimiter`) until it is back."""

    def __init__(self, redis: RedisLink) -> None:
        self._redis = redis
        self._alone = MemoryLimiter()

    async def hit(self, key: str, rate: Rate) -> Decision:
        now = time.time()
        bucket = f"units-api:rl:{key}:{rate.window}:{int(now // rate.window)}"

        async def count(client: Redis) -> int:
            async with client.pipeline(transaction=True) as pipe:
                pipe.incr(bucket)
                pipe.expire(bucket, rate.window + 1)
                counted, _ = await pipe.execute()
            return int(counted)

        try:
            return _decide(await self._redis.run(count), rate, now)
        except Unavailable:
            return await self._alone.hit(key, rate)

    async def close(self) -> None:
        await self._alone.close()


def create_limiter(redis: RedisLink | None) -> Limiter:
    return RedisLimiter(redis) if redis else MemoryLimiter()


async def per_address(limiter: Limiter, client: tuple[str, int] | None, rate: Rate) -> Decision:
    """One request of a client address against the public pages' and feeds' shared limit
    (no key, so the address is who asks)."""
    address = client[0] if client else "unknown"
    return await limiter.hit(f"public:{address}", rate)
