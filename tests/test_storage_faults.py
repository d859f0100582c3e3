"""A full disk (CONTRACT 16), on a small real tmpfs of the test's own: an upload that cannot
be stored is a 507 and leaves nothing behind, an export fails at once naming storage and
leaves no partial file, /readyz says the files directory cannot be written, everything else
is served, and all works again once space is freed. On SQLite, a write on a full disk is a
507 and the database stays intact with every acknowledged write."""

from __future__ import annotations

import errno
import logging
import sqlite3
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from tests.conftest import Api, claim_first, start_api, unit_body
from tests.exports.test_exports import EXPORTS, finished
from tests.jobs.test_execution import LEASE, Lines
from units_api.background import JOBS
from units_api.clock import utcnow
from units_api.config import Settings
from units_api.http.json import dumps
from units_api.jobs import queue
from units_api.jobs.execution import run_claimed
from units_api.jobs.queue import LeaseLost
from units_api.jobs.tables import jobs
from units_api.jobs.work import JobContext
from units_api.migrate import upgrade
from units_api.units.tables import units

IMPORTS = "/api/v2/units/imports"
CSV = b"name,type,city,price\n" + b"Garden Villa,villa,Cairo,1000\n" * 2000


class Disk:
    """A small tmpfs that `fill` fills up and `free` empties again."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.filler = path / "filler"

    def fill(self) -> None:
        with self.filler.open("ab", buffering=0) as file:
            for size in (64 * 1024, 1):  # then the last partial page
                try:
                    while True:
                        file.write(bytes(size))
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC

    def read_only(self, read_only: bool) -> None:
        mode = "remount,ro" if read_only else "remount,rw"
        subprocess.run(["mount", "-o", mode, str(self.path)], check=True)

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)

    def leftovers(self, under: str) -> list[str]:
        return sorted(p.name for p in (self.path / under).rglob("*") if p.is_file())


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Disk]:
    """A real 8 MiB tmpfs mounted for the test (the tests run as root), unmounted after."""
    path = tmp_path / "disk"
    path.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(path)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs (root needed): {mounted.stderr.decode()}")
    try:
        yield Disk(path)
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


async def create(api: Api, project: str) -> int:
    body = unit_body(subProjectId=project)
    response = await api.request(
        "POST", "/api/v2/units/", content=dumps(body), headers={"content-type": "application/json"}
    )
    return response.status_code


async def export(api: Api, project: str) -> dict[str, object]:
    body = {"format": "csv", "filter": f"subProjectId=={project}"}
    response = await api.request("POST", EXPORTS, json=body)
    assert response.status_code == 202, response.text
    return await finished(api, response.json()["id"])


async def claimed_import(api: Api, prefix: str, count: int) -> tuple[str, uuid.UUID, queue.Claim]:
    """An import of `count` villas of a new project, uploaded and its job claimed (not run)."""
    project = f"{prefix}-{uuid.uuid4().hex[:10]}"
    rows = f"Garden Villa,villa,Cairo,1000,{project}\n".encode() * count
    csv = b"name,type,city,price,subProjectId\n" + rows
    upload = await api.request("POST", IMPORTS, files={"file": ("units.csv", csv)})
    assert upload.status_code == 202, upload.text
    job_id = uuid.UUID(upload.json()["id"])
    return project, job_id, await claim_first(api, job_id, "import")


async def test_a_full_files_directory_fails_uploads_and_exports_and_nothing_else(
    settings: Settings, disk: Disk
) -> None:
    on_disk = settings.model_copy(update={"files_dir": str(disk.path / "files")})
    async for api in start_api(on_disk):
        project = f"full-{uuid.uuid4().hex[:10]}"
        assert await create(api, project) == 201
        assert (await api.request("GET", "/readyz")).status_code == 200
        disk.fill()

        ready = await api.request("GET", "/readyz")
        assert ready.status_code == 503
        assert "files directory" in ready.json()["detail"]
        assert "no space left on device" in ready.json()["detail"]

        upload = await api.request("POST", IMPORTS, files={"file": ("units.csv", CSV)})
        assert upload.status_code == 507, upload.text
        assert upload.headers["content-type"] == "application/problem+json"
        assert upload.json()["type"].endswith("/storage-full")
        assert "no space left on device" in upload.json()["detail"]
        assert disk.leftovers("files") == []

        job = await export(api, project)
        assert job["status"] == "failed"
        error = str(job["error"])
        assert error.startswith("storage-full: ") and "no space left on device" in error
        assert "unexpected" not in error
        assert disk.leftovers("files") == []

        # Everything else is served.
        assert await create(api, project) == 201
        listed = await api.request("GET", f"/api/v2/units/?p=subProjectId=={project}")
        assert listed.status_code == 200 and len(listed.json()["data"]) == 2

        disk.free()
        assert (await api.request("GET", "/readyz")).status_code == 200
        job = await export(api, project)
        assert job["status"] == "succeeded" and job["rowCount"] == 2
        upload = await api.request("POST", IMPORTS, files={"file": ("units.csv", CSV)})
        assert upload.status_code == 202, upload.text


async def test_a_read_only_files_directory_is_storage_unavailable(
    settings: Settings, disk: Disk
) -> None:
    on_disk = settings.model_copy(update={"files_dir": str(disk.path / "files")})
    async for api in start_api(on_disk):
        project = f"ro-{uuid.uuid4().hex[:10]}"
        assert await create(api, project) == 201
        disk.read_only(True)
        try:
            ready = await api.request("GET", "/readyz")
            assert ready.status_code == 503 and "read-only file system" in ready.text
            upload = await api.request("POST", IMPORTS, files={"file": ("units.csv", CSV)})
            assert upload.status_code == 507, upload.text
            assert upload.json()["type"].endswith("/storage-unavailable")
            job = await export(api, project)
            assert job["status"] == "failed"
            assert str(job["error"]).startswith("storage-unavailable: ")
        finally:
            disk.read_only(False)
        assert (await api.request("GET", "/readyz")).status_code == 200


def empty_the_log(database: Path) -> None:
    """The database's write-ahead log copied into its file and cut to nothing: SQLite starts
    a log again from its beginning, so a small write fits in what an earlier, longer one left
    there, even on a full disk."""
    with sqlite3.connect(database) as conn:
        busy, _logged, _copied = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    assert busy == 0
    assert database.with_name(database.name + "-wal").stat().st_size == 0


@pytest.fixture
def database_on_disk(disk: Disk) -> Path:
    database = disk.path / "units.db"
    upgrade(f"sqlite:///{database}")
    return database


async def test_sqlite_on_a_full_disk_refuses_writes_and_keeps_every_acknowledged_one(
    disk: Disk, database_on_disk: Path, files_dir: str
) -> None:
    database = database_on_disk
    url = f"sqlite:///{database}"
    settings = Settings(database_url=url, access_log=False, files_dir=files_dir)
    async for api in start_api(settings):
        project = f"sq-{uuid.uuid4().hex[:10]}"
        acknowledged = [(await api.create_unit(subProjectId=project))["id"] for _ in range(5)]
        disk.fill()
        refused = []
        for _ in range(50):  # until the pages SQLite had free are used up
            status = await create(api, project)
            if status == 201:
                acknowledged.append("later")
                continue
            refused.append(status)
            break
        assert refused == [507]
        answer = await api.request(
            "POST",
            "/api/v2/units/",
            content=dumps(unit_body(subProjectId=project)),
            headers={"content-type": "application/json"},
        )
        assert answer.status_code == 507
        assert answer.json()["type"].endswith("/storage-full")
        assert (await api.request("GET", f"/api/v2/units/{acknowledged[0]}")).status_code == 200

        disk.free()
        assert await create(api, project) == 201
        listed = await api.request("GET", f"/api/v2/units/?p=subProjectId=={project}&limit=100")
        assert len(listed.json()["data"]) == len(acknowledged) + 1
    with sqlite3.connect(database) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        count = conn.execute(
            "SELECT count(*) FROM units WHERE sub_project_id = ?", (project,)
        ).fetchone()
        assert count == (len(acknowledged) + 1,)


async def test_an_export_on_a_full_disk_fails_at_once_and_logs_no_space(
    settings: Settings, disk: Disk
) -> None:
    idle = settings.model_copy(update={"run_jobs": False, "files_dir": str(disk.path)})
    async for api in start_api(idle):
        db = api.context.db
        project = f"log-{uuid.uuid4().hex[:10]}"
        assert await create(api, project) == 201
        params = {"format": "csv", "compression": "none", "filter": f"subProjectId=={project}"}
        async with db.transaction() as conn:
            job_id = await queue.enqueue(conn, "export", params, max_attempts=3)
        claim = await claim_first(api, job_id, "export")
        disk.fill()
        lines = Lines()
        logger = logging.getLogger("units_api.jobs.execution")
        logger.addHandler(lines)
        try:
            await run_claimed(JobContext(db, idle, api.context.storage, claim, LEASE), JOBS)
        finally:
            logger.removeHandler(lines)
        async with db.read() as conn:
            row = await queue.get(conn, job_id)
        assert row is not None and row["status"] == "failed"  # the first of 3 attempts
        assert row["error"].startswith("storage-full: ")
        (line,) = [line for line in lines.lines if str(job_id) in line]
        logged = orjson.loads(line)
        assert logged["message"] == "job failed" and "exception" not in logged
        assert "no space left on device" in logged["error"]
        assert disk.leftovers(".") == ["filler"]


async def test_an_import_into_sqlite_on_a_full_disk_waits_for_space_and_writes_no_row_twice(
    disk: Disk, database_on_disk: Path, files_dir: str
) -> None:
    """The database's disk full, the import's job cannot even be failed: it is left to its
    lease (neither failed as unexpected nor queued again while the disk is full), claimed
    again once space is freed, and finished with every row written once."""
    url = f"sqlite:///{database_on_disk}"
    settings = Settings(database_url=url, access_log=False, files_dir=files_dir, run_jobs=False)
    async for api in start_api(settings):
        db = api.context.db
        project, job_id, claim = await claimed_import(api, "imp", 600)
        empty_the_log(database_on_disk)  # no room left in it either, for the job's end
        disk.fill()
        lines = Lines()
        logger = logging.getLogger("units_api.jobs.execution")
        logger.addHandler(lines)
        try:
            await run_claimed(JobContext(db, settings, api.context.storage, claim, LEASE), JOBS)
        finally:
            logger.removeHandler(lines)
        async with db.read() as conn:
            row = await queue.get(conn, job_id)
        assert row is not None and row["status"] == "running" and row["error"] is None
        (line,) = [line for line in lines.lines if str(job_id) in line]
        logged = orjson.loads(line)
        assert "exception" not in logged and "unexpected" not in line
        assert logged["error"].startswith("storage-full: ")
        assert "database or disk is full" in logged["error"]

        disk.free()
        async with db.transaction() as conn:  # its lease runs out
            await conn.execute(update(jobs).where(jobs.c.id == job_id).values(lease_until=utcnow()))
        claim = await claim_first(api, job_id, "import")
        assert claim.attempt == 2
        await run_claimed(JobContext(db, settings, api.context.storage, claim, LEASE), JOBS)
        job = (await api.request("GET", f"{IMPORTS}/{job_id}")).json()
        assert job["status"] == "succeeded", job["error"]
        assert job["rowsCreated"] == 600 and job["rowsFailed"] == 0
    with sqlite3.connect(database_on_disk) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        count = conn.execute(
            "SELECT count(*) FROM units WHERE sub_project_id = ?", (project,)
        ).fetchone()
        assert count == (600,)


@dataclass(slots=True)
class _GoneAfterOneBatch(JobContext):
    """A job's process whose supervisor is gone once its first batch is committed: the next
    batch stops (LeaseLost, as `check_parent` raises it) before it is written."""

    batches: int = 0

    async def checkpoint(
        self, conn: AsyncConnection, state: dict[str, Any], done: int, total: int | None
    ) -> None:
        if self.batches:
            raise LeaseLost("the supervising process is gone")
        self.batches += 1
        await JobContext.checkpoint(self, conn, state, done, total)


async def test_an_import_failed_by_storage_reports_the_rows_it_had_committed(
    settings: Settings, disk: Disk
) -> None:
    """Its first attempt commits one batch of 1,000 rows and stops; the second finds the
    files directory read-only: the job fails naming storage and still counts those rows, as
    they are in the database."""
    on_disk = settings.model_copy(update={"files_dir": str(disk.path / "files"), "run_jobs": False})
    async for api in start_api(on_disk):
        db = api.context.db
        project, job_id, claim = await claimed_import(api, "part", 2500)
        first = _GoneAfterOneBatch(db, on_disk, api.context.storage, claim, LEASE)
        await run_claimed(first, JOBS)
        assert first.batches == 1

        disk.read_only(True)
        try:
            async with db.transaction() as conn:  # its lease runs out
                await conn.execute(
                    update(jobs).where(jobs.c.id == job_id).values(lease_until=utcnow())
                )
            claim = await claim_first(api, job_id, "import")
            assert claim.attempt == 2
            await run_claimed(JobContext(db, on_disk, api.context.storage, claim, LEASE), JOBS)
        finally:
            disk.read_only(False)
        job = (await api.request("GET", f"{IMPORTS}/{job_id}")).json()
        assert job["status"] == "failed"
        assert str(job["error"]).startswith("storage-unavailable: ")
        assert job["rowCount"] == 1000 and job["rowsTotal"] == 1000
        assert job["rowsOk"] == 1000 and job["rowsCreated"] == 1000
        assert job["rowsFailed"] == 0 and job["errors"] == []
        async with db.read() as conn:
            stored = await conn.scalar(
                select(func.count()).select_from(units).where(units.c.sub_project_id == project)
            )
        assert stored == 1000
