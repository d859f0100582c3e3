"""Delivery across real processes on one PostgreSQL: a worker killed with SIGKILL in the
middle of deliveries, and two workers sharing the work."""

from __future__ import annotations

import asyncio
import signal
from collections import Counter
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx

from tests import processes
from tests.conftest import stop_server
from tests.processes import Deployed, start_worker
from tests.webhooks.receiver import receiver


def deployment(tmp_path: Path) -> AbstractContextManager[Deployed]:
    """A database of its own and a server that leaves background work to workers."""
    settings = {
        "UNITS_API_WEBHOOK_ALLOW_PRIVATE": "true",
        "UNITS_API_WEBHOOK_TIMEOUT_SECONDS": "3",
    }
    return processes.deployment(tmp_path, "units_hooks", settings)


async def event_ids(client: httpx.AsyncClient, count: int) -> list[str]:
    """The ids of the feed's unit.created events (all the test wrote)."""
    response = await client.get("/api/v2/events", params={"limit": 1000})
    assert response.status_code == 200
    ids = [event["id"] for event in response.json()["data"]]
    assert len(ids) == count
    return ids


async def create_units(client: httpx.AsyncClient, count: int) -> None:
    for i in range(count):
        response = await client.post("/api/v2/units/", json={"name": f"Unit {i}", "type": "villa"})
        assert response.status_code == 201, response.text


async def hook(client: httpx.AsyncClient, url: str) -> dict[str, Any]:
    response = await client.post(
        "/api/v2/webhooks", json={"url": url, "eventTypes": ["unit.created"]}
    )
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def test_a_worker_killed_mid_delivery_loses_nothing(tmp_path: Path) -> None:
    with deployment(tmp_path) as (env, base, headers):
        asyncio.run(_killed_mid_delivery(tmp_path, env, base, headers))


async def _killed_mid_delivery(
    tmp_path: Path, env: dict[str, str], base: str, headers: dict[str, str]
) -> None:
    async with (
        receiver() as target,
        httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as client,
    ):
        target.delay = 0.5  # deliveries are in flight when the worker dies
        created = await hook(client, target.url)
        first = start_worker(env, tmp_path / "worker.log")
        try:
            await create_units(client, 40)
            await target.wait_for(lambda got: len(got) >= 5, seconds=60)
            first.send_signal(signal.SIGKILL)
            first.wait(10)
        finally:
            stop_server(first)
        second = start_worker(env, tmp_path / "worker.log")
        try:
            expected = set(await event_ids(client, 40))
            got = await target.wait_for(
                lambda got: {r.headers["webhook-id"] for r in got} >= expected, seconds=90
            )
            for received in got:
                assert received.verify(created["secret"])["id"] == received.headers["webhook-id"]
            log: list[dict[str, Any]] = []
            for _ in range(100):
                page = await client.get(
                    f"/api/v2/webhooks/{created['id']}/deliveries", params={"limit": 200}
                )
                log = page.json()["data"]
                if all(d["status"] == "succeeded" for d in log):
                    break
                await asyncio.sleep(0.2)
            assert len(log) == 40 and all(d["status"] == "succeeded" for d in log)
            assert {d["eventId"] for d in log} == expected
        finally:
            stop_server(second)


def test_two_workers_deliver_each_event_once(tmp_path: Path) -> None:
    with deployment(tmp_path) as (env, base, headers):
        asyncio.run(_two_workers(tmp_path, env, base, headers))


async def _two_workers(
    tmp_path: Path, env: dict[str, str], base: str, headers: dict[str, str]
) -> None:
    async with (
        receiver() as target,
        httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as client,
    ):
        await hook(client, target.url)
        workers = [start_worker(env, tmp_path / f"worker{i}.log") for i in range(2)]
        try:
            await create_units(client, 60)
            expected = set(await event_ids(client, 60))
            await target.wait_for(
                lambda got: {r.headers["webhook-id"] for r in got} >= expected, seconds=60
            )
            await asyncio.sleep(2)  # anything sent twice would have arrived by now
            counts = Counter(r.headers["webhook-id"] for r in target.received)
            assert set(counts) == expected and set(counts.values()) == {1}
            assert all(worker.poll() is None for worker in workers)
        finally:
            for worker in workers:
                stop_server(worker)
