"""Several machines with local files (no UNITS_API_STORAGE_URL), on both databases: an import
run by another machine than the one that received its upload is tried again (that machine may
take it), then fails naming the machine that holds the file; one whose upload was deleted fails
at once."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import select, update

from tests.conftest import Api, claim_first, start_api
from tests.imports.test_imports import IMPORTS, start_import
from units_api.background import JOBS
from units_api.config import Settings
from units_api.errors import kept_elsewhere
from units_api.events.tables import events
from units_api.imports.tasks import UPLOAD
from units_api.jobs import queue
from units_api.jobs.execution import run_claimed
from units_api.jobs.storage import open_storage
from units_api.jobs.tables import jobs
from units_api.jobs.work import JobContext

LEASE = timedelta(seconds=60)
CSV = b"name,type,city\nGarden Villa A-12,villa,New Cairo\n"


def on_machine(settings: Settings, machine: str, files_dir: str) -> Settings:
    return settings.model_copy(
        update={
            "run_jobs": False,
            "storage_url": None,
            "machine_name": machine,
            "files_dir": files_dir,
        }
    )


async def claimed_import(api: Api) -> queue.Claim:
    """An import uploaded to `api`'s machine, claimed."""
    response = await start_import(api, CSV, "units.csv")
    assert response.status_code == 202, response.text
    return await claim_first(api, uuid.UUID(response.json()["id"]), "import")


async def run_on(api: Api, settings: Settings, claim: queue.Claim) -> dict[str, Any]:
    """Run the claimed job's body as the machine of `settings` does; the job as the API shows
    it then."""
    storage = open_storage(settings.storage_url, settings.files_dir, settings.machine_name)
    await run_claimed(JobContext(api.context.db, settings, storage, claim, LEASE), JOBS)
    job: dict[str, Any] = (await api.request("GET", f"{IMPORTS}/{claim.id}")).json()
    return job


async def ended_once(api: Api, job_id: uuid.UUID) -> tuple[int, dict[str, Any]]:
    """The job's attempts, and the data of its one `import.failed` event."""
    async with api.context.db.read() as conn:
        row = await queue.get(conn, job_id)
        found = (
            await conn.execute(select(events.c.data).where(events.c.type == "import.failed"))
        ).all()
    assert row is not None
    (data,) = [d for d in (orjson.loads(e.data) for e in found) if d["id"] == str(job_id)]
    return row["attempts"], data


async def test_an_upload_received_by_another_machine_is_tried_again_then_failed_naming_it(
    settings: Settings, tmp_path: Path
) -> None:
    """The machine that received the upload may take the job on a later attempt (and resume
    it from its checkpoint); at the last attempt the job fails, naming that machine."""
    a = on_machine(settings, "machine-a", settings.files_dir)
    b = on_machine(settings, "machine-b", str(tmp_path / "machine-b"))
    async for api in start_api(a):
        claim = await claimed_import(api)
        first = await run_on(api, b, claim)
        async with api.context.db.transaction() as conn:
            await conn.execute(  # due now, at its last attempt
                update(jobs)
                .where(jobs.c.id == claim.id)
                .values(run_after=datetime(2000, 1, 1, tzinfo=UTC), attempts=claim.max_attempts - 1)
            )
        last = await queue.claim(api.context.db, "test", LEASE, ("import",))
        assert last is not None and last.id == claim.id and last.attempt == last.max_attempts
        job = await run_on(api, b, last)
        attempts, event = await ended_once(api, claim.id)

    assert first["status"] == "queued"  # released for another attempt, not failed
    assert job["status"] == "failed" and attempts == last.max_attempts
    assert job["error"] == kept_elsewhere(UPLOAD, "machine-a", "machine-b")
    assert "on machine 'machine-a', and this is 'machine-b'" in job["error"]
    assert "UNITS_API_STORAGE_URL" in job["error"]
    assert (event["status"], event["error"]) == ("failed", job["error"])


async def test_an_upload_deleted_before_the_job_read_it_fails_the_job_at_once(
    settings: Settings,
) -> None:
    a = on_machine(settings, "machine-a", settings.files_dir)
    async for api in start_api(a):
        claim = await claimed_import(api)
        (Path(a.files_dir) / claim.params["upload"]).unlink()
        job = await run_on(api, a, claim)
        attempts, event = await ended_once(api, claim.id)

    assert job["status"] == "failed" and attempts == 1
    assert job["error"].startswith(
        f"{UPLOAD} is no longer in the files directory of machine 'machine-a'"
    )
    assert "deleted" in job["error"] and "Upload the file again" in job["error"]
    assert (event["status"], event["error"]) == ("failed", job["error"])
