"""Delivering webhooks: fan-out of the feed into deliveries, then claim, send and record.

Fan-out walks the feed from the stored `webhooks` position, one process at a time (they
take turns on the position's row lock), and writes a delivery row for each matching enabled
webhook in the same transaction that moves the position: nothing is skipped or doubled
across restarts.

Deliveries are claimed with FOR UPDATE SKIP LOCKED: a claim counts the attempt and puts the
next try off by a lease, so a worker that dies leaves its deliveries to be taken again when
the lease ends (at least once, the same `webhook-id`). They are sent outside any
transaction, and a result is recorded only if its worker still holds the claim.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy.engine import Row, RowMapping

from units_api import loop, metrics, tracing
from units_api.clock import utcnow
from units_api.db import Database
from units_api.errors import bound_error
from units_api.events import repository as events_repository
from units_api.events.sequencer import sequence
from units_api.events.service import LEFT, Times, Verdict, View, judge, times_before
from units_api.filters.parser import parse_filter
from units_api.ids import uuid7
from units_api.webhooks import repository
from units_api.webhooks.repository import FAILED, PENDING, SUCCEEDED
from units_api.webhooks.sender import Attempt, Sender
from units_api.webhooks.service import (
    Timing,
    after_attempt,
    judge_endpoints,
    signing_secrets,
)

log = logging.getLogger(__name__)

FAN_OUT_BATCH = 1000
RECORD_PAUSE = 0.005
# Steps over new events (numbering, fan-out) start at least this far apart: under a stream
# of writes every commit wakes the worker, and a step per commit would cost the writes more
# than it delivers sooner (the first attempt's target is a second after the commit).
EVENTS_STEP_GAP = 0.1
# An attempt's outcome in the metrics, by the status it leaves its delivery in.
OUTCOMES = {SUCCEEDED: "succeeded", PENDING: "retrying", FAILED: "failed"}


@dataclass(frozen=True, slots=True)
class _Subscription:
    """An enabled webhook as fan-out judges events against it."""

    id: uuid.UUID
    since: int
    types: frozenset[str] | None  # None: every type
    view: View | None

    @classmethod
    def of(cls, hook: RowMapping) -> _Subscription:
        types = orjson.loads(hook["event_types"])
        node = parse_filter(hook["filter"], "filter") if hook["filter"] else None
        return cls(
            hook["id"],
            hook["since_pos"],
            None if types == ["*"] else frozenset(types),
            None if node is None else View.of(node),
        )

    def wants(self, event: Row[Any], times: Times) -> Verdict:
        """Whether the event is for this webhook, and how (`events/service.judge`)."""
        if event.pos <= self.since or (self.types is not None and event.type not in self.types):
            return None
        return judge(event, self.view, times)


async def fan_out(db: Database) -> int:
    """Deliveries for the feed's new events; how many events were fanned out."""
    total = 0
    while True:
        async with db.transaction() as conn:
            mark = await events_repository.lock_position(conn, "webhooks")
            if mark is None:
                return total
            head = (await events_repository.positions(conn))["head"]
            if head == mark:
                return total
            hooks = [_Subscription.of(hook) for hook in await repository.enabled(conn)]
            if not hooks:
                # Nothing subscribes: the position moves on without reading the events.
                await events_repository.set_position(conn, "webhooks", head)
                return total + head - mark
            found = await events_repository.page(conn, mark, head, FAN_OUT_BATCH)
            if not found:
                return total
            now = utcnow()
            times = await times_before(conn, [hook.view for hook in hooks], found)
            rows = [
                repository.new_delivery(
                    hook.id, event.id, event.pos, event.type, now, verdict == LEFT
                )
                for event in found
                for hook in hooks
                if (verdict := hook.wants(event, times)) is not None
            ]
            await repository.insert_deliveries(conn, rows)
            await events_repository.set_position(conn, "webhooks", found[-1].pos)
        total += len(found)
        if len(found) < FAN_OUT_BATCH:
            return total


@dataclass(slots=True)
class _Job:
    delivery_id: uuid.UUID
    webhook_id: uuid.UUID
    attempts: int
    url: str
    secrets: list[str]
    event_id: str
    body: bytes | None
    trace_context: str | None = None  # of the request or job that wrote the event


class Deliverer:
    """Claims due deliveries while it has room for them, sends each in its own task, and
    records the results in batches."""

    def __init__(self, db: Database, sender: Sender, timing: Timing, capacity: int = 100):
        self.db = db
        self.sender = sender
        self.timing = timing
        self.capacity = capacity
        self.done = asyncio.Event()
        self._in_flight: dict[asyncio.Task[None], _Job] = {}
        self._results: list[tuple[_Job, Attempt]] = []

    @property
    def busy(self) -> bool:
        return bool(self._in_flight or self._results)

    async def step(self) -> int:
        """Record finished attempts, then claim and start what there is room for."""
        await self.record()
        room = self.capacity - len(self._in_flight)
        if room <= 0:
            return 0
        jobs = await self._claim(room)
        for job in jobs:
            task = asyncio.create_task(self._send(job))
            self._in_flight[task] = job
            task.add_done_callback(self._sent)
        return len(jobs)

    async def _claim(self, room: int) -> list[_Job]:
        now = utcnow()
        async with self.db.transaction() as conn:
            claimed = await repository.claim(conn, now, now + self.timing.lease, room)
            if not claimed:
                return []
            hooks = await repository.by_ids(conn, list({row["webhook_id"] for row in claimed}))
            positions = [row["event_pos"] for row in claimed]
            whole = [row["event_pos"] for row in claimed if not row["unit_left"]]
            bodies = await events_repository.rendered_at(conn, whole)
            left = [row["event_pos"] for row in claimed if row["unit_left"]]
            left_bodies = await events_repository.rendered_left_at(conn, left)
            traces: dict[int, str] = {}
            if tracing.on:
                traces = await events_repository.trace_contexts_at(conn, positions)
        return [
            _Job(
                row["id"],
                row["webhook_id"],
                row["attempts"],
                hooks[row["webhook_id"]]["url"],
                signing_secrets(hooks[row["webhook_id"]]),
                str(row["event_id"]),
                (left_bodies if row["unit_left"] else bodies).get(row["event_pos"]),
                traces.get(row["event_pos"]),
            )
            for row in claimed
        ]

    async def _send(self, job: _Job) -> None:
        with tracing.delivery_attempt(
            str(job.webhook_id),
            str(job.delivery_id),
            job.event_id,
            job.attempts,
            job.trace_context,
        ) as traced:
            if job.body is None:
                attempt = Attempt(None, 0, "The event is no longer kept.", None)
            else:
                try:
                    attempt = await self.sender.send(
                        job.url, job.secrets, job.event_id, job.body, traced.traceparent
                    )
                except Exception as exc:  # a failed attempt, retried like any other
                    log.exception("webhook send failed unexpectedly", extra=_ids(job))
                    attempt = Attempt(None, 0, f"{type(exc).__name__}: {exc}"[:500], None)
            traced.set(**{"http.response.status_code": attempt.status_code})
            if not attempt.ok:  # the error's text may quote the URL: not in the span
                code = attempt.status_code
                traced.fail(f"answered {code}" if code else "no answer")
        self._results.append((job, attempt))
        self.done.set()

    async def record(self) -> None:
        if not self._results:
            return
        results, self._results = self._results, []
        now = utcnow()
        rows: list[dict[str, Any]] = []
        succeeded: set[uuid.UUID] = set()
        failed: dict[uuid.UUID, Attempt] = {}
        for job, attempt in results:
            row = self._result_row(job, attempt, now)
            rows.append(row)
            metrics.observe_attempt(OUTCOMES[row["status"]], attempt.duration_ms / 1000)
            if attempt.ok:
                succeeded.add(job.webhook_id)
            else:
                failed[job.webhook_id] = attempt
                _log_failure(job, attempt)
        async with self.db.transaction() as conn:
            await repository.record(conn, rows)
            await judge_endpoints(conn, succeeded, failed, now, self.timing)

    def _result_row(self, job: _Job, attempt: Attempt, now: datetime) -> dict[str, Any]:
        status, next_at = after_attempt(
            job.attempts, attempt, job.body is not None, self.timing, now
        )
        return {
            "attempt_id": uuid7(),
            "delivery_id": job.delivery_id,
            "claimed": job.attempts,
            "status": status,
            "next_at": next_at,
            "at": now,
            "code": attempt.status_code,
            "error": bound_error(attempt.error),
            "duration": attempt.duration_ms,
            "response": attempt.response,
        }

    def _sent(self, task: asyncio.Task[None]) -> None:
        self._in_flight.pop(task, None)

    async def cancel(self) -> None:
        """Stop the sends under way and give their deliveries back (due at once for another
        process, the attempt not counted), and record those that finished."""
        sending = dict(self._in_flight)
        for task in sending:
            task.cancel()
        if sending:
            await asyncio.wait(list(sending))
        stopped = [
            (job.delivery_id, job.attempts) for task, job in sending.items() if task.cancelled()
        ]
        with contextlib.suppress(Exception):
            await asyncio.shield(self._finish(stopped))

    async def _finish(self, stopped: list[tuple[uuid.UUID, int]]) -> None:
        await self.record()
        if stopped:
            async with self.db.transaction() as conn:
                await repository.release(conn, stopped, utcnow())


def _ids(job: _Job) -> dict[str, Any]:
    return {
        "webhookId": str(job.webhook_id),
        "deliveryId": str(job.delivery_id),
        "eventId": job.event_id,
        "attempt": job.attempts,
    }


def _log_failure(job: _Job, attempt: Attempt) -> None:
    """One line per failed attempt, with its ids (never a secret or the body)."""
    log.warning(
        "webhook delivery attempt failed",
        extra={**_ids(job), "statusCode": attempt.status_code, "error": attempt.error},
    )


async def run_forever(
    db: Database,
    sender: Sender,
    timing: Timing,
    wake: asyncio.Event,
    poll: float,
    stop: asyncio.Event,
) -> None:
    """Until `stop`: number new events, fan them out, deliver what is due; then wait for new
    events, a finished send, or the next poll. Stopping between steps (never by cancelling
    a transaction) leaves no transaction half-done."""
    deliverer = Deliverer(db, sender, timing)
    looked = -poll

    async def step() -> loop.Pause:
        nonlocal looked
        if deliverer.done.is_set() and not wake.is_set():
            # Sends finish one by one: gather a few before recording them together.
            await asyncio.sleep(RECORD_PAUSE)
        since = time.monotonic() - looked
        new_events = (wake.is_set() and since >= EVENTS_STEP_GAP) or since >= poll
        deliverer.done.clear()
        if new_events:
            wake.clear()
            looked = time.monotonic()
            # Waiting on a step under way elsewhere (milliseconds) rather than leaving to it
            # what committed after its snapshot: the first attempt goes out now.
            await sequence(db)
            await fan_out(db)
        await deliverer.step()
        if wake.is_set():
            # Events written since the last step wait out the gap (what is written meanwhile
            # joins them); finished sends are still recorded as they come.
            rest = max(0.0, looked + EVENTS_STEP_GAP - time.monotonic())
            return loop.Pause(rest, (deliverer.done,))
        return loop.Pause(poll, (wake, deliverer.done))

    try:
        await loop.run("webhooks", step, stop, poll)
    finally:
        await deliverer.cancel()
