"""Several machines with local files (no UNITS_API_STORAGE_URL): an export's file asked of a
machine that does not hold it is a 503 naming the machine that does, never a 410; a file gone
from the disk of the machine that wrote it is a 410."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import cli_admin_key, fresh_postgres
from tests.test_fleet import machines
from units_api.migrate import upgrade

EXPORTS = "/api/v2/units/exports"


@pytest.fixture(scope="module")
def two_machines(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, str, dict[str, str], Path]]:
    """Machine A runs jobs and keeps its files; machine B only serves: their base URLs, an
    admin key's headers and A's files directory."""
    root = tmp_path_factory.mktemp("machines")
    with fresh_postgres("units_machines") as url:
        upgrade(url)
        shared = {
            **os.environ,
            "UNITS_API_DATABASE_URL": url,
            "UNITS_API_ACCESS_LOG": "false",
            "UNITS_API_JOB_POLL_SECONDS": "0.2",
        }
        shared.pop("UNITS_API_STORAGE_URL", None)
        headers = {"Authorization": f"Bearer {cli_admin_key(shared)}"}
        servers = {"machine-a": {}, "machine-b": {"UNITS_API_RUN_JOBS": "false"}}
        with machines(shared, root, servers) as bases:
            yield bases["machine-a"], bases["machine-b"], headers, root / "machine-a" / "files"


async def exported(client: httpx.AsyncClient) -> dict[str, Any]:
    response = await client.post(EXPORTS, json={"format": "csv"})
    assert response.status_code == 202, response.text
    for _ in range(300):
        job: dict[str, Any] = (await client.get(response.headers["location"])).json()
        if job["status"] in ("succeeded", "failed"):
            assert job["status"] == "succeeded", job
            return job
        await asyncio.sleep(0.1)
    raise AssertionError("the export did not finish")


async def test_a_file_on_another_machine_is_a_503_naming_it(
    two_machines: tuple[str, str, dict[str, str], Path],
) -> None:
    a, b, headers, _ = two_machines
    async with (
        httpx.AsyncClient(base_url=a, headers=headers) as on_a,
        httpx.AsyncClient(base_url=b, headers=headers) as on_b,
    ):
        job = await exported(on_a)
        file = f"{EXPORTS}/{job['id']}/file"
        assert (await on_a.get(file)).status_code == 200
        elsewhere = await on_b.get(file)
    assert elsewhere.status_code == 503
    assert elsewhere.headers["content-type"] == "application/problem+json"
    problem = elsewhere.json()
    assert problem["type"] == "/problems/file-on-another-machine"
    assert problem["machine"] == "machine-a" and problem["thisMachine"] == "machine-b"
    assert "'machine-a'" in problem["detail"] and "UNITS_API_STORAGE_URL" in problem["detail"]
    assert problem["instance"] == file and problem["requestId"]


async def test_a_file_gone_from_the_machine_that_wrote_it_is_a_410(
    two_machines: tuple[str, str, dict[str, str], Path],
) -> None:
    a, _, headers, files = two_machines
    async with httpx.AsyncClient(base_url=a, headers=headers) as on_a:
        job = await exported(on_a)
        (files / "exports" / f"{job['id']}.csv").unlink()
        gone = await on_a.get(f"{EXPORTS}/{job['id']}/file")
    assert gone.status_code == 410
    assert gone.json()["type"] == "/problems/gone"
