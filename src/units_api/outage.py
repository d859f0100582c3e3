"""Whether the database is known not to answer: after a wait to reach it ran out (a
connection made, or waited for in a pool), requests fail at once instead of each waiting out
the bound again, until a probe of its own finds the database answering.

A database that refuses or closes connections (a restart, a failover) says so at once and
needs none of this; one that takes connections and answers nothing (frozen, or cut off
without a reset) would otherwise keep every request waiting the whole bound. A statement that
ran out of time on a connection it had may be slow for its own sake (a long query, a lock):
it starts the probe but no outage, which begins only if the probe gets no answer either (the
database frozen under the statement), so one slow query never refuses the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy.exc import TimeoutError as PoolTimeout

log = logging.getLogger(__name__)

# Seconds between probes while the database does not answer.
PROBE_EVERY = 0.25
# How far down an error's chain (the driver's error, causes, errors raised while handling
# it) a timeout is looked for.
CHAIN_DEPTH = 8


def timed_out(error: BaseException | None, depth: int = 0) -> bool:
    """Whether `error` is, or was caused by, a wait on the database running out."""
    if error is None or depth > CHAIN_DEPTH:
        return False
    if isinstance(error, TimeoutError | PoolTimeout):
        return True
    return any(
        timed_out(under, depth + 1)
        for under in (getattr(error, "orig", None), error.__cause__, error.__context__)
        if under is not error
    )


class Outage:
    """The database not answering, as this process last found it (see the module's text)."""

    def __init__(self, dsn: Callable[[], str], bound: float) -> None:
        self._dsn = dsn
        self._bound = bound
        self.since: float | None = None
        self._probe: asyncio.Task[None] | None = None

    @property
    def known(self) -> bool:
        return self.since is not None

    def found(self, error: BaseException, reached: bool = False) -> None:
        """Note `error`, met on the database: a timeout starts the probe, and an outage at
        once unless the database had been `reached` (a statement ran out of time on a
        connection it had: the outage waits for the probe to go unanswered too)."""
        if not timed_out(error):
            return
        if not reached:
            self._begin()
        if self._probe is None or self._probe.done():
            self._probe = asyncio.create_task(self._until_answered())

    def _begin(self) -> None:
        if self.since is None:
            self.since = time.monotonic()
            log.warning("the database does not answer; requests fail at once until it does")

    async def _until_answered(self) -> None:
        while not await self._answers():
            self._begin()
            await asyncio.sleep(PROBE_EVERY)
        if self.since is not None:
            down = time.monotonic() - self.since
            log.warning("the database answers again", extra={"downSeconds": round(down, 3)})
        self.since = None

    async def _answers(self) -> bool:
        try:
            conn = await asyncpg.connect(self._dsn(), timeout=self._bound)
        except Exception:
            return False
        try:
            await conn.fetchval("SELECT 1", timeout=self._bound)
        except Exception:
            return False
        finally:
            conn.terminate()
        return True

    async def close(self) -> None:
        if self._probe is not None:
            self._probe.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._probe
