"""Jobs across real processes on one PostgreSQL: a worker killed with SIGKILL in the middle
of an export or an import (the job is taken over and finishes once, no row twice), and two
workers sharing jobs (each runs once)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import uuid
from collections import Counter
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import httpx

from tests import processes
from tests.conftest import CLI, stop_server
from tests.processes import Deployed, start_worker
from units_api.http.json import dumps

EXPORTS = "/api/v2/units/exports"
IMPORTS = "/api/v2/units/imports"


def deployment(tmp_path: Path) -> AbstractContextManager[Deployed]:
    """A database of its own and a server that leaves jobs to workers (short leases)."""
    settings = {
        "UNITS_API_JOB_LEASE_SECONDS": "3",
        "UNITS_API_JOB_POLL_SECONDS": "0.2",
        "UNITS_API_FILES_DIR": str(tmp_path / "files"),
    }
    return processes.deployment(tmp_path, "units_jobs", settings)


async def job_rows(url: str) -> dict[str, Any]:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch("SELECT id, status, attempts FROM jobs")
        return {str(row["id"]): dict(row) for row in rows}
    finally:
        await conn.close()


async def scalar(url: str, sql: str, *args: Any) -> Any:
    conn = await asyncpg.connect(url)
    try:
        return await conn.fetchval(sql, *args)
    finally:
        await conn.close()


async def wait_for(
    client: httpx.AsyncClient, location: str, seconds: float = 120
) -> dict[str, Any]:
    for _ in range(int(seconds * 10)):
        job: dict[str, Any] = (await client.get(location)).json()
        if job["status"] in ("succeeded", "failed"):
            return job
        await asyncio.sleep(0.1)
    raise AssertionError(f"{location} did not finish")


async def wait_until_under_way(client: httpx.AsyncClient, location: str) -> None:
    """Until the job reports progress, short of its end."""
    for _ in range(600):
        job = (await client.get(location)).json()
        assert job["status"] in ("queued", "running"), job
        if job["status"] == "running" and 0 < job["progress"] < 1:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the job never got under way")


async def job_events(client: httpx.AsyncClient, types: str) -> Counter[str]:
    found: Counter[str] = Counter()
    after = None
    while True:
        params = {"types": types, "limit": "1000", **({"after": after} if after else {})}
        body = (await client.get("/api/v2/events", params=params)).json()
        found.update(event["data"]["id"] for event in body["data"])
        if not body["data"]:
            return found
        after = body["nextCursor"]


def kill(process: subprocess.Popen[bytes]) -> None:
    os.kill(process.pid, signal.SIGKILL)
    process.wait(10)


def test_a_killed_workers_export_is_taken_over_and_finishes_once(tmp_path: Path) -> None:
    with deployment(tmp_path) as (env, base, headers):
        subprocess.run([*CLI, "seed", "--count", "20000", "--seed", "7"], env=env, check=True)
        asyncio.run(
            _a_killed_workers_export_is_taken_over_and_finishes_once(tmp_path, env, base, headers)
        )


async def _a_killed_workers_export_is_taken_over_and_finishes_once(
    tmp_path: Path, env: dict[str, str], base: str, headers: dict[str, str]
) -> None:
    first = start_worker(env, tmp_path / "worker-1.log")
    try:
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as client:
            response = await client.post(EXPORTS, json={"format": "xlsx"})
            assert response.status_code == 202, response.text
            location = response.headers["location"]
            await wait_until_under_way(client, location)
            kill(first)
            second = start_worker(env, tmp_path / "worker-2.log")
            try:
                job = await wait_for(client, location)
            finally:
                stop_server(second)
            assert job["status"] == "succeeded", job
            assert job["rowCount"] == 20000
            assert (await job_events(client, "export.succeeded"))[job["id"]] == 1
            rows = await job_rows(env["UNITS_API_DATABASE_URL"])
            assert rows[job["id"]]["attempts"] == 2
            file = await client.get(f"{location}/file")
            assert file.status_code == 200 and len(file.content) == job["bytes"]
    finally:
        stop_server(first)


def test_a_killed_workers_import_resumes_and_writes_no_row_twice(tmp_path: Path) -> None:
    with deployment(tmp_path) as (env, base, headers):
        asyncio.run(
            _a_killed_workers_import_resumes_and_writes_no_row_twice(tmp_path, env, base, headers)
        )


async def _a_killed_workers_import_resumes_and_writes_no_row_twice(
    tmp_path: Path, env: dict[str, str], base: str, headers: dict[str, str]
) -> None:
    project = f"kill-{uuid.uuid4().hex[:8]}"
    rows = 8000
    content = b"".join(
        dumps({"name": f"Unit {i}", "type": "villa", "subProjectId": project}) + b"\n"
        for i in range(rows)
    )
    first = start_worker(env, tmp_path / "worker-1.log")
    try:
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as client:
            response = await client.post(IMPORTS, files={"file": ("units.jsonl", content)})
            assert response.status_code == 202, response.text
            location = response.headers["location"]
            await wait_until_under_way(client, location)
            kill(first)
            url = env["UNITS_API_DATABASE_URL"]
            written = await scalar(
                url, "SELECT count(*) FROM units WHERE sub_project_id = $1", project
            )
            assert 0 < written < rows  # killed half way
            second = start_worker(env, tmp_path / "worker-2.log")
            try:
                job = await wait_for(client, location)
            finally:
                stop_server(second)
            assert job["status"] == "succeeded", job
            assert (job["rowsTotal"], job["rowsOk"], job["rowsFailed"]) == (rows, rows, 0)
            names = await scalar(
                url,
                "SELECT count(DISTINCT name) FROM units WHERE sub_project_id = $1",
                project,
            )
            total = await scalar(
                url, "SELECT count(*) FROM units WHERE sub_project_id = $1", project
            )
            assert names == total == rows
            events = await scalar(
                url,
                "SELECT count(*) FROM events WHERE type = 'unit.created' AND unit_id IN "
                "(SELECT id FROM units WHERE sub_project_id = $1)",
                project,
            )
            assert events == rows
            assert (await job_events(client, "import.succeeded"))[job["id"]] == 1
    finally:
        stop_server(first)


def test_two_workers_run_each_job_once(tmp_path: Path) -> None:
    with deployment(tmp_path) as (env, base, headers):
        subprocess.run([*CLI, "seed", "--count", "300", "--seed", "3"], env=env, check=True)
        asyncio.run(_two_workers_run_each_job_once(tmp_path, env, base, headers))


async def _two_workers_run_each_job_once(
    tmp_path: Path, env: dict[str, str], base: str, headers: dict[str, str]
) -> None:
    workers = [start_worker(env, tmp_path / f"worker-{n}.log") for n in (1, 2)]
    try:
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as client:
            locations = []
            for n in range(6):
                response = await client.post(EXPORTS, json={"format": ("csv", "jsonl")[n % 2]})
                assert response.status_code == 202
                locations.append(response.headers["location"])
                line = dumps({"name": f"Unit {n}", "type": "villa"}) + b"\n"
                response = await client.post(IMPORTS, files={"file": ("u.jsonl", line * 50)})
                assert response.status_code == 202
                locations.append(response.headers["location"])
            finished = [await wait_for(client, location) for location in locations]
            assert {job["status"] for job in finished} == {"succeeded"}
            rows = await job_rows(env["UNITS_API_DATABASE_URL"])
            assert {rows[job["id"]]["attempts"] for job in finished} == {1}
            events = await job_events(client, "export.succeeded,import.succeeded")
            assert all(events[job["id"]] == 1 for job in finished)
            assert len(events) == len(finished)
    finally:
        for worker in workers:
            stop_server(worker)
