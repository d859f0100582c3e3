"""Job files in an S3-compatible store: a real S3 server (moto's) on loopback."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path

import boto3
import pytest
from moto.server import ThreadedMotoServer
from sqlalchemy import update

from tests.conftest import Api, start_api
from tests.exports.test_exports import download, exact, make_units, run_export
from tests.imports.test_imports import project_units, run_import
from tests.test_cli import free_port
from units_api.clock import utcnow
from units_api.config import Settings
from units_api.jobs.housekeeping import expire_files
from units_api.jobs.storage import ObjectStorage
from units_api.jobs.tables import jobs

BUCKET = "units-files"


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    ).create_bucket(Bucket=BUCKET)
    try:
        yield endpoint
    finally:
        server.stop()


@pytest.fixture
async def s3_api(
    settings: Settings, s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Api]:
    for name, value in {
        "AWS_ENDPOINT_URL": s3_endpoint,
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    stored = settings.model_copy(update={"storage_url": f"s3://{BUCKET}/jobs"})
    async for api in start_api(stored):
        yield api


async def gone_soon(storage: ObjectStorage, key: str, seconds: float = 10) -> bool:
    for _ in range(int(seconds * 20)):
        if await storage.size(key) is None:
            return True
        await asyncio.sleep(0.05)
    return False


async def test_exports_and_imports_go_through_the_object_store(s3_api: Api) -> None:
    storage = s3_api.context.storage
    assert isinstance(storage, ObjectStorage)
    project, made = await make_units(s3_api, 3)
    job = await run_export(s3_api, {"format": "jsonl", "filter": f"subProjectId=={project}"})
    assert job["status"] == "succeeded", job
    key = f"exports/{job['id']}.jsonl"
    assert await storage.size(key) == job["bytes"]
    content = await download(s3_api, job)
    assert [exact(line) for line in content.decode().splitlines()] == made

    imported = await run_import(s3_api, content, "units.jsonl", mode="upsert")
    assert imported["status"] == "succeeded" and imported["rowsOk"] == 3
    assert await project_units(s3_api, project) == made
    # the upload is deleted just after the job ends, so it may outlive the job's end briefly
    assert await gone_soon(storage, f"imports/{imported['id']}.jsonl")

    async with s3_api.context.db.transaction() as conn:
        await conn.execute(
            update(jobs)
            .where(jobs.c.id == uuid.UUID(job["id"]))
            .values(expires_at=utcnow() - timedelta(seconds=1))
        )
    assert await expire_files(s3_api.context.db, storage) >= 1
    assert await storage.size(key) is None
    gone = await s3_api.request("GET", f"/api/v2/units/exports/{job['id']}/file")
    assert gone.status_code == 410


async def test_a_missing_object_is_a_missing_file(s3_api: Api) -> None:
    """A job fetching an object that is not there learns it as from local files (and an
    import told so fails at once)."""
    storage = s3_api.context.storage
    assert isinstance(storage, ObjectStorage)
    scratch = storage.scratch(".csv")
    with pytest.raises(FileNotFoundError, match=r"imports/nothing\.csv not found"):
        await storage.fetch("imports/nothing.csv", scratch)
    scratch.unlink(missing_ok=True)


def files_in(folder: Path) -> list[Path]:
    return [path for path in folder.rglob("*") if path.is_file()]


@pytest.fixture
async def unreachable_s3_api(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Api]:
    """An object store that nothing answers at (a loopback port no one listens on)."""
    for name, value in {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}",
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    update = {"storage_url": f"s3://{BUCKET}/jobs", "files_dir": str(tmp_path)}
    async for api in start_api(settings.model_copy(update=update)):
        yield api


async def test_an_object_store_out_of_reach_is_storage_unavailable(
    unreachable_s3_api: Api, tmp_path: Path
) -> None:
    api = unreachable_s3_api
    upload = await api.request(
        "POST", "/api/v2/units/imports", files={"file": ("units.csv", b"name,type\nA,villa\n")}
    )
    assert upload.status_code == 507, upload.text
    assert upload.json()["type"].endswith("/storage-unavailable")
    assert "object store" in upload.json()["detail"]
    project, _ = await make_units(api, 1)
    job = await run_export(api, {"format": "csv", "filter": f"subProjectId=={project}"})
    assert job["status"] == "failed" and job["error"].startswith("storage-unavailable: ")
    assert files_in(tmp_path) == []  # no partial file kept
    assert (await api.request("GET", "/api/v2/units/")).status_code == 200
