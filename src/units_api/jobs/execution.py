"""Running jobs: claimed by a process's job loop, each run in a child process of its own, so
the CPU-heavy body (formats, parsing, validation) never holds the API's event loop.

The parent claims a job, starts a child for it (forkserver: the child starts from a process
that has the service imported already), and renews the lease while the child runs. The child
runs the body and ends the job, with its job event, in one transaction fenced on the claim.
A child that dies leaves the job to the queue again (released at once, or taken over when its
lease runs out if the parent died too); a child whose parent is gone stops at its next
progress report, before writing anything more.

The kinds and the writer of a job's end event are given from above (`JobSetup`, made in
`background.py`): the runner hands them to each child, so both find a kind the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import os
import socket
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from multiprocessing.connection import Connection
from typing import Any

import orjson
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from units_api import loop, metrics, tracing
from units_api.clock import utcnow
from units_api.config import Settings
from units_api.db import Database, create_engine
from units_api.errors import StorageUnavailable, bound_error
from units_api.http.json import dumps
from units_api.jobs import queue
from units_api.jobs.kinds import Kinds
from units_api.jobs.queue import FAILED, SUCCEEDED, Claim, LeaseLost
from units_api.jobs.service import render
from units_api.jobs.storage import Storage, open_storage, storage_fault
from units_api.jobs.work import JobContext, JobFailed
from units_api.process import settle_collector, yield_cpu

log = logging.getLogger(__name__)
# A job that failed unexpectedly (the database went away...) is tried again after this long.
RETRY_AFTER = timedelta(seconds=30)
CHILD_POLL = 0.2  # how often the parent looks whether the child is still running
UNEXPECTED = "The job failed unexpectedly {n} times; the server log has the details."
SYSTEM_ACTOR = {"type": "system", "id": None, "name": "jobs"}  # a job no key asked for
# Writes a job's end event in `conn`'s transaction: (conn, its type, the job as the API shows
# it, the actor that asked for the job).
RecordEvent = Callable[[AsyncConnection, str, bytes, dict[str, Any]], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class JobSetup:
    """What running jobs is given from above: the kinds, and the writer of a job's end
    event."""

    kinds: Kinds
    record_event: RecordEvent

    async def ended(self, conn: AsyncConnection, row: RowMapping) -> None:
        """The event of a job that has just ended (`row`, as it ended), in `conn`'s
        transaction, by the actor that asked for it."""
        actor = orjson.loads(row["params"]).get("actor") or SYSTEM_ACTOR
        job = render(row, self.kinds.kind(row["kind"]))
        await self.record_event(conn, f"{row['kind']}.{row['status']}", dumps(job), actor)

    async def lost(self, conn: AsyncConnection, row: RowMapping) -> None:
        """A job failed for being taken over too often (its processes kept dying): its event
        written in the same transaction, logged and counted as any failed job."""
        kind = str(row["kind"])
        await self.ended(conn, row)
        log.warning(
            "job failed",
            extra={"jobId": str(row["id"]), "kind": kind, "error": row["error"]},
        )
        started = row["started_at"]  # its first attempt's start: the time it took, in all
        seconds = (row["finished_at"] - started).total_seconds() if started else 0.0
        metrics.observe_job(kind, FAILED, max(0.0, seconds))


async def end_job(db: Database, setup: JobSetup, claim: Claim, status: str, **values: Any) -> None:
    """End the claimed job with `status`, and write its event, in one transaction."""
    async with db.transaction() as conn:
        if status == SUCCEEDED:
            values["progress"] = 1.0
        elif "result" not in values:
            values.update(await _so_far(conn, setup, claim))
        await queue.record(
            conn,
            claim,
            status=status,
            lease_owner=None,
            lease_until=None,
            finished_at=utcnow(),
            **values,
        )
        row = await queue.get(conn, claim.id)
        assert row is not None
        await setup.ended(conn, row)


async def _so_far(conn: AsyncConnection, setup: JobSetup, claim: Claim) -> dict[str, Any]:
    """What a job that fails without a result of its own (storage, an unexpected error, its
    file's fault) shows of the work it committed: its kind's reading of its last checkpoint
    (an import's counts), read in `conn`'s transaction."""
    so_far = setup.kinds.kind(claim.kind).so_far
    if so_far is None:
        return {}
    row = await queue.get(conn, claim.id)
    if row is None or not row["checkpoint"]:
        return {}
    return so_far(orjson.loads(row["checkpoint"]))


async def run_claimed(context: JobContext, setup: JobSetup) -> None:
    """Run a claimed job's body and end the job; a job whose lease was lost is left alone."""
    claim = context.claim
    try:
        try:
            values = await setup.kinds.kind(claim.kind).body(context)
        except JobFailed as exc:
            # the input's own fault (a bad file...): retrying cannot fix it
            error = bound_error(str(exc))
            log.warning(
                "job failed", extra={"jobId": str(claim.id), "kind": claim.kind, "error": error}
            )
            await end_job(context.db, setup, claim, FAILED, error=error, **exc.values)
        except LeaseLost:
            raise
        except Exception as exc:
            if (fault := storage_fault(exc)) is not None:
                await _storage_failed(context.db, setup, claim, fault)
            else:
                log.exception("job failed", extra={"jobId": str(claim.id), "kind": claim.kind})
                await _retry_or_fail(context.db, setup, claim)
        else:
            await end_job(context.db, setup, claim, SUCCEEDED, **values)
        upload = claim.params.get("upload")
        if upload:
            await _discard(context.db, context.storage, claim.id, upload)
    except LeaseLost:
        log.warning("job lease lost; stopping", extra={"jobId": str(claim.id), "kind": claim.kind})


async def _storage_failed(
    db: Database, setup: JobSetup, claim: Claim, fault: StorageUnavailable
) -> None:
    """A job whose storage is full or failing (the file store, or SQLite's database file):
    failed naming it, as a retry soon would fail the same way. When not even that can be
    written (the database's own disk full), the job is left to its lease: claimed again once
    the database takes writes, an import resuming after its last committed batch."""
    error = bound_error(f"{fault.code}: {fault.detail}")
    about = {"jobId": str(claim.id), "kind": claim.kind, "error": error}
    try:
        await end_job(db, setup, claim, FAILED, error=error)
    except Exception as exc:
        if storage_fault(exc) is None:
            raise
        log.warning("job stopped; it runs again once the database takes writes", extra=about)
        return
    log.warning("job failed", extra=about)


async def _retry_or_fail(db: Database, setup: JobSetup, claim: Claim) -> None:
    """A job that failed unexpectedly: queued again after a pause, or failed after its last
    attempt."""
    if claim.attempt >= claim.max_attempts:
        await end_job(db, setup, claim, FAILED, error=UNEXPECTED.format(n=claim.attempt))
    else:
        await queue.release(db, claim, RETRY_AFTER * claim.attempt)


async def _discard(db: Database, storage: Storage, job_id: uuid.UUID, key: str) -> None:
    """Delete a job's uploaded file once the job has ended (it is not needed again)."""
    async with db.read() as conn:
        row = await queue.get(conn, job_id)
    if row is not None and row["status"] in (SUCCEEDED, FAILED):
        try:
            await storage.delete(key)
        except Exception as exc:  # the store read-only or failing: the job has ended all the same
            if (fault := storage_fault(exc)) is None:
                raise
            about = {"jobId": str(job_id), "file": key, "error": bound_error(fault.detail)}
            log.warning("job's uploaded file not deleted", extra=about)


def child_main(
    settings: dict[str, Any],
    storage_env: dict[str, str],
    claim: Claim,
    parent: Connection,
    setup: JobSetup,
    trace_parent: str | None = None,
    counting: tuple[str, str] | None = None,
) -> None:
    """The child process: run one claimed job, with the parent's settings and object store
    credentials (a forkserver's children inherit its environment, not the parent's now);
    traced, when the environment asks for it, under the parent's span `trace_parent`; its
    reads counted where the parent says (`metrics.job_counting`), so its server's scrapes
    include them."""
    from units_api.logs import configure_logging

    os.environ.update(storage_env)
    metrics.init_job_process(counting)
    # Requests first: at a lowered priority, or in the idle class if the kind allows it.
    yield_cpu(idle=setup.kinds.kind(claim.kind).idle)
    configured = Settings(**settings)
    configure_logging(configured.log_level)
    tracing.configure_from_environment()
    settle_collector()

    async def main() -> None:
        db = Database(create_engine(configured.database_url, pool_size=2))
        storage = open_storage(
            configured.storage_url, configured.files_dir, configured.machine_name
        )
        lease = timedelta(seconds=configured.job_lease_seconds)
        try:
            with tracing.job_body(claim.kind, str(claim.id), claim.attempt, trace_parent):
                context = JobContext(db, configured, storage, claim, lease, parent)
                await run_claimed(context, setup)
        finally:
            await db.dispose()
            # the job process's peak memory, for benchmarks and operators (KiB on Linux)
            log.info(
                "job process ended",
                extra={"jobId": str(claim.id), "peakRssKiB": _peak_rss_kib()},
            )

    try:
        import uvloop
    except ImportError:  # pragma: no cover - not on Windows
        asyncio.run(main())
    else:
        uvloop.run(main())
    finally:
        tracing.shutdown()  # its spans sent: a job's process runs no exit handlers


def _peak_rss_kib() -> int | None:
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return None
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _storage_env() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if name.startswith("AWS_")}


def _process_context(kinds: Kinds) -> Any:
    if sys.platform == "linux":
        context = multiprocessing.get_context("forkserver")
        # What a job needs, and not the web application (a smaller process).
        context.set_forkserver_preload(["units_api.jobs.execution", *kinds.modules.values()])
        return context
    return multiprocessing.get_context("spawn")


class JobRunner:
    """A process's job loop: up to `job_processes` jobs at a time, each in its own child."""

    def __init__(
        self, db: Database, settings: Settings, wake: asyncio.Event, setup: JobSetup
    ) -> None:
        self.db = db
        self.settings = settings
        self.wake = wake
        self.setup = setup
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.lease = timedelta(seconds=settings.job_lease_seconds)
        self._processes = _process_context(setup.kinds)
        # The slots whose child is running (or not known to have exited): a child counts its
        # metrics under its slot's name, which no two children may share at once.
        self._slots: set[int] = set()

    async def run_forever(self, stop: asyncio.Event) -> None:
        """Until `stop`: claim jobs while there is room, then wait for a wake-up (a job
        queued here), a job's end, or the next poll; asked to stop, waits for the jobs
        under way (each stops its child and releases its job)."""
        running: set[asyncio.Task[None]] = set()
        ended = asyncio.Event()

        async def step() -> loop.Pause:
            self.wake.clear()
            ended.clear()
            while len(running) < self.settings.job_processes:
                claim = await queue.claim(
                    self.db, self.owner, self.lease, self.setup.kinds.names(), lost=self.setup.lost
                )
                if claim is None:
                    break
                slot = min(set(range(len(self._slots) + 1)) - self._slots)
                self._slots.add(slot)
                task = asyncio.create_task(self._supervise(claim, stop, slot))
                running.add(task)
                task.add_done_callback(running.discard)
                task.add_done_callback(lambda _: ended.set())
            return loop.Pause(self.settings.job_poll_seconds, (self.wake, ended))

        await loop.run("jobs", step, stop, self.settings.job_poll_seconds)
        if running:
            await asyncio.gather(*running, return_exceptions=True)

    async def _supervise(self, claim: Claim, stop: asyncio.Event, slot: int) -> None:
        """Run the job in a child, renewing its lease, until the child exits. Asked to stop,
        the child is stopped and the job released for another process. `slot` is freed once
        the child has exited."""
        with tracing.job_run(claim.kind, str(claim.id), claim.attempt) as traced:
            watched, alive = self._processes.Pipe(duplex=False)
            process = self._processes.Process(
                target=child_main,
                args=(
                    self.settings.model_dump(),
                    _storage_env(),
                    claim,
                    watched,
                    self.setup,
                    traced.traceparent,
                    metrics.job_counting(slot),
                ),
                name=f"units-api job {claim.id}",
                daemon=True,
            )
            started = time.monotonic()
            try:
                # In a thread: a start waits for the forkserver, which the first one starts
                # (and which imports what a job needs, about a second) and each one asks for
                # a fork.
                await asyncio.to_thread(process.start)
                watched.close()
                try:
                    await self._watch(claim, process, stop)
                finally:
                    alive.close()
            finally:
                if not process.is_alive():
                    self._slots.discard(slot)
            status = await self._count(claim, time.monotonic() - started)
            traced.set(**{"units_api.job.status": status})
            if status == FAILED:
                traced.fail("the job failed")

    async def _count(self, claim: Claim, seconds: float) -> str | None:
        """The run in the metrics, by the status it left the job in (queued: for a retry)."""
        try:
            async with self.db.read() as conn:
                row = await queue.get(conn, claim.id)
        except Exception as exc:
            log.warning(
                "a job's end could not be counted",
                extra={"jobId": str(claim.id), "kind": claim.kind, "error": bound_error(repr(exc))},
            )
            return None
        if row is None:
            return None
        metrics.observe_job(claim.kind, row["status"], seconds)
        return str(row["status"])

    async def _watch(self, claim: Claim, process: Any, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        beat = self.lease.total_seconds() / 4
        next_beat = loop.time() + beat
        try:
            while process.is_alive():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), CHILD_POLL)
                if stop.is_set():
                    await self._stop_child(process)
                    await queue.release(self.db, claim)
                    return
                if loop.time() >= next_beat:
                    next_beat = loop.time() + beat
                    try:
                        await queue.heartbeat(self.db, claim, self.lease)
                    except LeaseLost:
                        raise
                    except Exception:  # SQLite busy with the job's own long write, say
                        log.warning("job heartbeat failed", extra={"jobId": str(claim.id)})
            if process.exitcode != 0:
                log.warning(
                    "job process died",
                    extra={"jobId": str(claim.id), "kind": claim.kind, "exit": process.exitcode},
                )
                await queue.release(self.db, claim, RETRY_AFTER)
        except LeaseLost:
            await self._stop_child(process)
        except Exception:
            log.exception("supervising a job failed", extra={"jobId": str(claim.id)})
            await self._stop_child(process)

    @staticmethod
    async def _stop_child(process: Any) -> None:
        if process.is_alive():
            process.terminate()
        await asyncio.to_thread(process.join, 10)
        if process.is_alive():
            process.kill()
            await asyncio.to_thread(process.join)
