"""A job's body on both databases: an unexpected exception logs one bounded line, however long
the exception's text."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import orjson
from sqlalchemy import select, update

from tests.conftest import claim_first, start_api
from units_api.background import JOBS
from units_api.config import Settings
from units_api.errors import MAX_ERROR_TEXT
from units_api.events.tables import events
from units_api.jobs import queue
from units_api.jobs.execution import UNEXPECTED, run_claimed
from units_api.jobs.storage import open_storage
from units_api.jobs.tables import jobs
from units_api.jobs.work import JobContext
from units_api.logs import TRACEBACK_FRAMES, JsonFormatter

LEASE = timedelta(seconds=60)
# A format whose file name no file system takes: making the job's scratch file raises an
# OSError that quotes all of it.
HUGE_FORMAT = "csv" + "x" * 300_000


class Lines(logging.Handler):
    """Log lines as a process writes them on stderr."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(JsonFormatter())
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


async def test_an_unexpected_failure_logs_a_bounded_line(settings: Settings) -> None:
    idle = settings.model_copy(update={"run_jobs": False})
    async for api in start_api(idle):
        db = api.context.db
        params = {
            "format": HUGE_FORMAT,
            "mode": "create",
            "dryRun": False,
            "atomic": False,
            "upload": "imports/none.csv",
            "actor": {"type": "system", "id": None, "name": "test"},
        }
        async with db.transaction() as conn:
            job_id = await queue.enqueue(conn, "import", params, max_attempts=1)
        claim = await claim_first(api, job_id, "import")
        storage = open_storage(idle.storage_url, idle.files_dir, idle.machine_name)
        lines = Lines()
        logger = logging.getLogger("units_api.jobs.execution")
        logger.addHandler(lines)
        try:
            await run_claimed(JobContext(db, idle, storage, claim, LEASE), JOBS)
        finally:
            logger.removeHandler(lines)

        async with db.read() as conn:
            row = await queue.get(conn, job_id)
        assert row is not None
        assert (row["status"], row["error"]) == ("failed", UNEXPECTED.format(n=1))
        (line,) = [line for line in lines.lines if str(job_id) in line]
        logged = orjson.loads(line)
        assert (logged["message"], logged["kind"]) == ("job failed", "import")
        exception = logged["exception"]
        assert exception.startswith("Traceback (most recent call last):\n")
        assert 0 < exception.count('\n  File "') <= TRACEBACK_FRAMES
        message = exception.rsplit("\n", 1)[-1]
        assert message.startswith("OSError: [Errno 36] File name too long: ")
        assert HUGE_FORMAT[:100] in message
        assert len(message) == MAX_ERROR_TEXT and message.endswith("…")
        assert len(line) < 3 * MAX_ERROR_TEXT + TRACEBACK_FRAMES * 300


async def test_a_job_whose_processes_keep_dying_fails_with_its_event(settings: Settings) -> None:
    """Taken over once too often, the job ends as any failed job does: its event written in
    the same transaction, a log line with its id."""
    idle = settings.model_copy(update={"run_jobs": False})
    async for api in start_api(idle):
        db = api.context.db
        params = {
            "format": "csv",
            "mode": "create",
            "dryRun": False,
            "atomic": False,
            "upload": "imports/none.csv",
            "actor": {"type": "apiKey", "id": "k-1", "name": "loader"},
        }
        async with db.transaction() as conn:
            job_id = await queue.enqueue(conn, "import", params, max_attempts=1)
            old = datetime(2000, 1, 1, tzinfo=UTC)  # first in line (see claim_first)
            lapsed = datetime.now(UTC) - timedelta(seconds=1)
            await conn.execute(
                update(jobs)
                .where(jobs.c.id == job_id)
                .values(
                    created_at=old,
                    started_at=old,
                    status="running",
                    attempts=1,
                    lease_owner="dead",
                    lease_until=lapsed,
                )
            )
        lines = Lines()
        logger = logging.getLogger("units_api.jobs.execution")
        logger.addHandler(lines)
        try:
            other = await queue.claim(db, "test", LEASE, ("import",), lost=JOBS.lost)
        finally:
            logger.removeHandler(lines)
        if other is not None:  # a job another test left queued: put back
            assert other.id != job_id
            await queue.release(db, other)

        async with db.read() as conn:
            row = await queue.get(conn, job_id)
            found = (await conn.execute(select(events.c.type, events.c.actor, events.c.data))).all()
        assert row is not None
        assert (row["status"], row["error"]) == ("failed", queue.WORKER_LOST)
        (event,) = [e for e in found if orjson.loads(e.data).get("id") == str(job_id)]
        assert event.type == "import.failed"
        assert orjson.loads(event.actor) == params["actor"]
        data = orjson.loads(event.data)
        assert (data["status"], data["error"]) == ("failed", queue.WORKER_LOST)
        (line,) = [orjson.loads(line) for line in lines.lines if str(job_id) in line]
        assert (line["message"], line["kind"], line["error"]) == (
            "job failed",
            "import",
            queue.WORKER_LOST,
        )
