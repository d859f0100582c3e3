"""What a job's body works with: its claim, the database, the file storage, and the way it
reports progress and commits checkpoints (each renews the lease, fenced on the claim)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import timedelta
from multiprocessing.connection import Connection
from typing import Any, Protocol, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection

from units_api.clock import utcnow
from units_api.config import Settings
from units_api.db import Database
from units_api.jobs import queue
from units_api.jobs.queue import Claim, LeaseLost
from units_api.jobs.storage import Storage

T = TypeVar("T")


# Progress is written at most this often (seconds); each write renews the lease.
PROGRESS_EVERY = 1.0


class JobFailed(Exception):
    """The job cannot succeed (a bad file, a format's limit): it fails with this message (and
    `values` written on the job, such as an import's report), and is not retried."""

    def __init__(self, message: str, **values: Any) -> None:
        super().__init__(message)
        self.values = values


class Progress(Protocol):
    async def __call__(self, done: int, total: int | None) -> None: ...


def fraction(done: int, total: int | None) -> float:
    return 0.0 if not total else min(1.0, done / total)


@dataclass(slots=True)
class JobContext:
    db: Database
    settings: Settings
    storage: Storage
    claim: Claim
    lease: timedelta
    # The read end of a pipe whose only write end the supervising process holds: once that
    # process is gone the pipe reads as closed, and the job stops.
    parent: Connection | None = None
    _reported: float = field(default=0.0)

    def check_parent(self) -> None:
        if self.parent is not None and self.parent.poll():
            raise LeaseLost("the supervising process is gone")

    async def progress(self, done: int, total: int | None) -> None:
        """Report how far the job is (throttled), renewing its lease."""
        self.check_parent()
        now = time.monotonic()
        if now - self._reported < PROGRESS_EVERY:
            return
        self._reported = now
        await queue.heartbeat(self.db, self.claim, self.lease, progress=fraction(done, total))

    async def checkpoint(
        self, conn: AsyncConnection, state: dict[str, Any], done: int, total: int | None
    ) -> None:
        """Commit `state` with the work it describes (in `conn`'s transaction), fenced."""
        self.check_parent()
        self._reported = time.monotonic()
        await queue.record(
            conn,
            self.claim,
            checkpoint=state,
            progress=fraction(done, total),
            lease_until=utcnow() + self.lease,
        )


async def take(queue: asyncio.Queue[T], producer: asyncio.Task[None]) -> T:
    """The next item a producer task put in `queue`, or the producer's error if it failed
    before putting one. The producer ends by putting an end mark (e.g. None) that the
    consumer stops at."""
    getting = asyncio.ensure_future(queue.get())
    await asyncio.wait((getting, producer), return_when=asyncio.FIRST_COMPLETED)
    if getting.done():
        return getting.result()
    getting.cancel()
    producer.result()  # raises the producer's error
    return await queue.get()  # it ended after putting its last item
