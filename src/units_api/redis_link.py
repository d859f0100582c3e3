"""Redis, which the processes of every server share (rate limits, remembered answers): one
client a process, and whether Redis answers.

No request waits on Redis longer than CALL_SECONDS a call, and none fails because of it: a
call that fails or takes longer marks Redis lost, and while it is lost every call gives up at
once (`Unavailable`) and its caller does without it (counts alone, computes). One task asks
Redis again every PROBE_SECONDS until it answers; then calls go to it again. One warning line
when Redis is lost, one when it is back, and the gauge `units_redis_up`.

redis-py's client is built with its own retries off (it would try a command three times, with
pauses, before giving up) and socket timeouts of CALL_SECONDS (its default waits for ever on a
frozen server); each call is also bounded as a whole (a connect and a command).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from units_api import metrics

if TYPE_CHECKING:
    from redis.asyncio import Redis

log = logging.getLogger(__name__)

CALL_SECONDS = 0.1  # the longest a request waits on Redis, per call
PROBE_SECONDS = 1.0  # how often a lost Redis is asked again

T = TypeVar("T")


class Unavailable(Exception):
    """Redis is out of reach or too slow: the caller does without it."""


class RedisLink:
    def __init__(self, url: str) -> None:
        from redis.asyncio import Redis
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        self.client: Redis = Redis.from_url(
            url,
            socket_timeout=CALL_SECONDS,
            socket_connect_timeout=CALL_SECONDS,
            retry=Retry(NoBackoff(), 0),
        )
        kwargs = self.client.connection_pool.connection_kwargs
        self.where = f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}"
        self.up = True
        self._probe: asyncio.Task[None] | None = None
        metrics.set_redis_up(True)

    async def run(self, call: Callable[[Redis], Awaitable[T]]) -> T:
        """`call`'s answer on the client; Unavailable (at once while Redis is lost) when
        Redis does not give it within CALL_SECONDS."""
        from redis.exceptions import RedisError

        if not self.up:
            self._watch()
            raise Unavailable
        try:
            async with asyncio.timeout(CALL_SECONDS):
                return await call(self.client)
        except (RedisError, OSError, TimeoutError) as exc:
            self._lost(exc)
            raise Unavailable from exc

    async def close(self) -> None:
        if self._probe is not None:
            self._probe.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._probe
        await self.client.aclose()

    def _lost(self, exc: BaseException) -> None:
        if not self.up:
            return
        self.up = False
        metrics.set_redis_up(False)
        reason = str(exc) or type(exc).__name__
        log.warning(
            f"Redis lost at {self.where} ({reason}): rate limits are counted by each process "
            "alone and answers computed until it is back"
        )
        self._watch()

    def _watch(self) -> None:
        if self._probe is None or self._probe.done():
            self._probe = asyncio.create_task(self._wait_until_back())

    async def _wait_until_back(self) -> None:
        from redis.exceptions import RedisError

        while not self.up:
            await asyncio.sleep(PROBE_SECONDS)
            try:
                async with asyncio.timeout(CALL_SECONDS):
                    await self.client.ping()
            except (RedisError, OSError, TimeoutError):
                continue
            self.up = True
            metrics.set_redis_up(True)
            log.warning(f"Redis back at {self.where}: rate limits are shared again")
