"""Scheduled work across real processes: a restart, and two workers on one PostgreSQL."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from sqlalchemy import func, select

from tests.conftest import CLI, READY_UNIT, Api, cli_admin_key, start_api
from tests.processes import serving
from tests.test_cli import free_port
from units_api.config import Settings
from units_api.events.tables import events


def soon(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def test_a_publication_due_while_the_server_was_down_happens_once(tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path}/restart.db"
    env = {**os.environ, "UNITS_API_DATABASE_URL": database, "UNITS_API_ACCESS_LOG": "false"}
    subprocess.run([*CLI, "migrate"], env=env, check=True, capture_output=True)
    headers = {"Authorization": f"Bearer {cli_admin_key(env)}"}
    port = free_port()
    with serving(env, port) as base:
        unit = httpx.post(f"{base}/api/v2/units/", json=READY_UNIT, headers=headers).json()
        scheduled = httpx.put(
            f"{base}/api/v2/units/publishing-actions/{unit['id']}",
            json={"action": "schedule", "at": soon(2.5)},
            headers=headers,
        )
        assert scheduled.json()["publishing"]["status"] == "scheduled"
    time.sleep(3.5)  # the time passes while nothing runs
    with serving(env, port) as base:
        deadline = time.monotonic() + 15
        status = None
        while time.monotonic() < deadline:
            status = httpx.get(f"{base}/api/v2/units/{unit['id']}", headers=headers).json()[
                "publishing"
            ]["status"]
            if status == "published":
                break
            time.sleep(0.2)
        assert status == "published"
        history = httpx.get(f"{base}/api/v2/units/{unit['id']}/history", headers=headers).json()[
            "data"
        ]
    assert [entry["action"] for entry in history].count("publish") == 1


async def test_two_workers_publish_each_due_unit_once(postgres_url: str) -> None:
    settings = Settings(database_url=postgres_url, access_log=False, run_jobs=False)
    async for api in start_api(settings):
        ids = [(await api.create_unit(**READY_UNIT))["id"] for _ in range(60)]
        at = soon(5)  # room for 60 requests on a busy machine
        for unit_id in ids:
            response = await api.request(
                "PUT",
                f"/api/v2/units/publishing-actions/{unit_id}",
                json={"action": "schedule", "at": at},
            )
            assert response.status_code == 200, response.text
        env = {
            **os.environ,
            "UNITS_API_DATABASE_URL": postgres_url,
            "UNITS_API_JOBS_INTERVAL_SECONDS": "0.1",
        }
        workers = [
            await asyncio.create_subprocess_exec(
                *CLI, "worker", env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            for _ in range(2)
        ]
        try:
            published = await wait_published(api, ids)
        finally:
            for process in workers:
                process.terminate()
                await process.wait()
        assert published == len(ids)
        async with api.context.db.read() as conn:
            query = (
                select(events.c.unit_id, func.count())
                .where(
                    events.c.type == "unit.published",
                    events.c.unit_id.in_([uuid.UUID(i) for i in ids]),
                )
                .group_by(events.c.unit_id)
            )
            counts = dict((await conn.execute(query)).all())
        assert len(counts) == len(ids) and set(counts.values()) == {1}


async def wait_published(api: Api, ids: list[str], seconds: float = 30) -> int:
    deadline = asyncio.get_running_loop().time() + seconds
    published = 0
    while asyncio.get_running_loop().time() < deadline:
        listed = await api.request(
            "GET",
            "/api/v2/units/",
            params={"p": f"id=in=({','.join(ids)});status==published", "limit": "1"},
        )
        published = listed.json()["meta"]["total"]
        if published == len(ids):
            break
        await asyncio.sleep(0.3)
    return published
