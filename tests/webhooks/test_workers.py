"""Delivery across real processes on one PostgreSQL: a worker killed with SIGKILL in the
middle of deliveries, and two workers sharing the work."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import CLI, cli_admin_key, fresh_postgres, wait_until_ready
from tests.test_cli import free_port
from tests.webhooks.receiver import receiver
from units_api.migrate import upgrade


@contextmanager
def deployment(tmp_path: Path) -> Iterator[tuple[dict[str, str], str, dict[str, str]]]:
    """A database of its own and a server that leaves background work to workers."""
    with fresh_postgres("units_hooks") as url, ExitStack() as stack:
        upgrade(url)
        env = {
            **os.environ,
            "UNITS_API_DATABASE_URL": url,
            "UNITS_API_ACCESS_LOG": "false",
            "UNITS_API_RUN_JOBS": "false",
            "UNITS_API_WEBHOOK_ALLOW_PRIVATE": "true",
            "UNITS_API_WEBHOOK_TIMEOUT_SECONDS": "3",
            "UNITS_API_RATE_LIMIT": "100000/minute",
        }
        headers = {"Authorization": f"Bearer {cli_admin_key(env)}"}
        port = free_port()
        log = stack.enter_context((tmp_path / "server.log").open("wb"))
        server = subprocess.Popen(
            [*CLI, "serve", "--port", str(port)], env=env, stdout=log, stderr=log
        )
        stack.callback(server.wait, 20)
        stack.callback(server.terminate)
        base = f"http://127.0.0.1:{port}"
        wait_until_ready(base)
        yield env, base, headers


def start_worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen([*CLI, "worker"], env=env, stdout=out, stderr=out)


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        process.wait(20)


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
            stop(first)
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
            stop(second)


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
                stop(worker)
