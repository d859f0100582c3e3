"""Several machines: two `units-api serve` processes with data directories of their own (two
machines) and one `units-api worker`, on one PostgreSQL, one Redis and one S3-compatible store
(moto's server), as the README's "Several machines" section sets them up. What one machine
does, the other sees: an export made through A downloads through B, each webhook event is
delivered once, a key's rate limit is shared, a scheduled publication happens once, and a
feed follower reading through both sees every event once."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from moto.server import ThreadedMotoServer

from tests.conftest import (
    CLI,
    READY_UNIT,
    REDIS_URL,
    cli_admin_key,
    fresh_postgres,
    need_service,
    wait_until_ready,
)
from tests.test_cli import free_port
from tests.webhooks.receiver import receiver
from units_api.migrate import upgrade

BUCKET = "units-fleet"
UNITS = "/api/v2/units/"
EVENTS = "/api/v2/events"


def start(command: str, env: Mapping[str, str], home: Path) -> subprocess.Popen[bytes]:
    """`units-api <command>` in `home` (its data directory), its output in `home`'s log."""
    home.mkdir(parents=True, exist_ok=True)
    with (home / f"{command}.log").open("ab") as log:
        args = [*CLI, command, *(["--port", env["UNITS_API_PORT"]] if command == "serve" else [])]
        return subprocess.Popen(args, env=dict(env), stdout=log, stderr=log, cwd=home)


def stop(process: subprocess.Popen[bytes]) -> None:
    """Ask it to stop; kill it if it has not within 20 seconds."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def machine_env(shared: Mapping[str, str], root: Path, name: str) -> dict[str, str]:
    """The settings of one machine: what all share, and its own name, port and files."""
    return {
        **shared,
        "UNITS_API_MACHINE_NAME": name,
        "UNITS_API_PORT": str(free_port()),
        "UNITS_API_FILES_DIR": str(root / name / "files"),
    }


@contextmanager
def machines(
    shared: Mapping[str, str], root: Path, servers: Mapping[str, Mapping[str, str]]
) -> Iterator[dict[str, str]]:
    """A `serve` per named machine (with its own extra settings), ready: their base URLs."""
    with ExitStack() as stack:
        bases = {}
        for name, extra in servers.items():
            env = {**machine_env(shared, root, name), **extra}
            stack.callback(stop, start("serve", env, root / name))
            bases[name] = f"http://127.0.0.1:{env['UNITS_API_PORT']}"
        for base in bases.values():
            wait_until_ready(base, seconds=60)
        yield bases


@contextmanager
def object_store() -> Iterator[dict[str, str]]:
    """moto's S3 server on loopback with an empty bucket: the AWS_* settings that reach it."""
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    env = {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_REGION": "us-east-1",
    }
    try:
        boto3.client(
            "s3",
            endpoint_url=env["AWS_ENDPOINT_URL"],
            region_name=env["AWS_REGION"],
            aws_access_key_id="test",
            aws_secret_access_key="test",
        ).create_bucket(Bucket=BUCKET)
        yield env
    finally:
        server.stop()


@dataclass(frozen=True)
class Fleet:
    a: str
    b: str
    headers: dict[str, str]

    def client(self, base: str, key: str | None = None) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {key}"} if key else self.headers
        return httpx.AsyncClient(base_url=base, headers=headers, timeout=30)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    need_service(REDIS_URL, "redis")
    assert REDIS_URL
    root = tmp_path_factory.mktemp("fleet")
    with fresh_postgres("units_fleet") as url, object_store() as aws, ExitStack() as stack:
        upgrade(url)
        shared = {
            **os.environ,
            **aws,
            "UNITS_API_DATABASE_URL": url,
            "UNITS_API_REDIS_URL": REDIS_URL,
            "UNITS_API_STORAGE_URL": f"s3://{BUCKET}/files",
            "UNITS_API_RUN_JOBS": "false",
            "UNITS_API_ACCESS_LOG": "false",
            "UNITS_API_JOBS_INTERVAL_SECONDS": "0.2",
            "UNITS_API_JOB_POLL_SECONDS": "0.2",
            "UNITS_API_WEBHOOK_ALLOW_PRIVATE": "true",
            "UNITS_API_WEBHOOK_TIMEOUT_SECONDS": "3",
            "UNITS_API_RATE_LIMIT": "100000/minute",
        }
        headers = {"Authorization": f"Bearer {cli_admin_key(shared)}"}
        worker = start("worker", machine_env(shared, root, "machine-w"), root / "machine-w")
        stack.callback(stop, worker)
        bases = stack.enter_context(machines(shared, root, {"machine-a": {}, "machine-b": {}}))
        yield Fleet(bases["machine-a"], bases["machine-b"], headers)
        assert worker.poll() is None, "the worker stopped"


async def create_units(fleet: Fleet, count: int, **fields: Any) -> list[str]:
    """`count` units, created through A and B in turn: their ids."""
    ids = []
    async with fleet.client(fleet.a) as a, fleet.client(fleet.b) as b:
        for index in range(count):
            body = {"name": f"Unit {index}", "type": "villa", **fields}
            response = await (a, b)[index % 2].post(UNITS, json=body)
            assert response.status_code == 201, response.text
            ids.append(response.json()["id"])
    return ids


async def finished(client: httpx.AsyncClient, location: str) -> dict[str, Any]:
    for _ in range(300):
        job: dict[str, Any] = (await client.get(location)).json()
        if job["status"] in ("succeeded", "failed"):
            return job
        await asyncio.sleep(0.1)
    raise AssertionError(f"{location} did not finish")


async def test_an_export_made_through_one_machine_downloads_through_the_other(
    fleet: Fleet,
) -> None:
    project = f"fleet-{uuid.uuid4().hex[:10]}"
    ids = await create_units(fleet, 6, subProjectId=project)
    async with fleet.client(fleet.a) as a, fleet.client(fleet.b) as b:
        asked = await a.post(
            "/api/v2/units/exports", json={"format": "jsonl", "filter": f"subProjectId=={project}"}
        )
        assert asked.status_code == 202, asked.text
        job = await finished(b, asked.headers["location"])  # made by the worker
        assert job["status"] == "succeeded", job
        through_b = await b.get(f"{asked.headers['location']}/file")
        through_a = await a.get(f"{asked.headers['location']}/file")
        assert through_b.status_code == 200, through_b.text
        assert through_b.content == through_a.content
        lines = through_b.content.decode().splitlines()
        assert [json.loads(line)["id"] for line in lines] == ids

        # and a file uploaded to B is read by the worker, on a machine of its own
        upload = {"file": ("units.jsonl", through_b.content)}
        imported = await b.post("/api/v2/units/imports", files=upload, data={"mode": "upsert"})
        assert imported.status_code == 202, imported.text
        job = await finished(a, imported.headers["location"])
    assert job["status"] == "succeeded", job
    assert job["rowsUnchanged"] == len(ids) and job["rowsFailed"] == 0


async def test_each_webhook_event_is_delivered_once(fleet: Fleet) -> None:
    project = f"fleet-{uuid.uuid4().hex[:10]}"
    async with receiver() as target, fleet.client(fleet.b) as b:
        created = await b.post(
            "/api/v2/webhooks",
            json={
                "url": target.url,
                "eventTypes": ["unit.created"],
                "filter": f"subProjectId=={project}",
            },
        )
        assert created.status_code == 201, created.text
        ids = await create_units(fleet, 20, subProjectId=project)
        await target.wait_for(lambda got: {r.event["unitId"] for r in got} >= set(ids), 60)
        await asyncio.sleep(2)  # anything sent twice would have arrived by now
    deliveries = Counter(r.headers["webhook-id"] for r in target.received)
    assert len(deliveries) == len(ids) and set(deliveries.values()) == {1}
    assert sorted(r.event["unitId"] for r in target.received) == sorted(ids)


async def limited_answers(fleet: Fleet, quota: int) -> list[int] | None:
    """The statuses of twice `quota` requests of a new key limited to `quota` an hour, sent
    through A and B in turn; None if the hour's window turned meanwhile."""
    async with fleet.client(fleet.a) as admin:
        made = await admin.post(
            "/api/v2/api-keys",
            json={"name": "limited", "scopes": ["units:read"], "rateLimit": f"{quota}/hour"},
        )
        assert made.status_code == 201, made.text
    key = made.json()["key"]
    window = int(time.time() // 3600)
    async with fleet.client(fleet.a, key) as a, fleet.client(fleet.b, key) as b:
        answers = [await (a, b)[i % 2].get(UNITS, params={"limit": 1}) for i in range(2 * quota)]
    if int(time.time() // 3600) != window:
        return None
    return [response.status_code for response in answers]


async def test_a_keys_rate_limit_is_shared_by_the_machines(fleet: Fleet) -> None:
    statuses = await limited_answers(fleet, 10) or await limited_answers(fleet, 10)
    assert statuses == [200] * 10 + [429] * 10  # refused by A and B alike


def soon(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


async def feed_end(fleet: Fleet) -> str:
    """The feed's end: the cursor from which only new events come."""
    after: str | None = None
    async with fleet.client(fleet.a) as a:
        while True:
            params = {"limit": "1000", **({"after": after} if after else {})}
            body = (await a.get(EVENTS, params=params)).json()
            after = body["nextCursor"]
            if not body["data"]:
                return str(after)


async def follow(
    fleet: Fleet, after: str, enough: Callable[[list[dict[str, Any]]], bool], limit: int = 1000
) -> list[dict[str, Any]]:
    """The feed's events from `after`, read through A and B in turn, until `enough` of them
    have come and the end is reached (fails after 60 seconds)."""
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + 60
    async with fleet.client(fleet.a) as a, fleet.client(fleet.b) as b:
        for turn in itertools.count():
            assert time.monotonic() < deadline, f"the feed did not deliver; got {len(seen)}"
            params = {"after": after, "limit": str(limit)}
            response = await (a, b)[turn % 2].get(EVENTS, params=params)
            assert response.status_code == 200, response.text
            body = response.json()
            seen.extend(body["data"])
            after = body["nextCursor"]
            if not body["data"]:
                if enough(seen):
                    return seen
                await asyncio.sleep(0.05)
    raise AssertionError("unreachable")


async def test_a_scheduled_publication_happens_once(fleet: Fleet) -> None:
    start = await feed_end(fleet)
    async with fleet.client(fleet.a) as a, fleet.client(fleet.b) as b:
        unit = (await a.post(UNITS, json=READY_UNIT)).json()
        scheduled = await b.put(
            f"/api/v2/units/publishing-actions/{unit['id']}",
            json={"action": "schedule", "at": soon(1.5)},
        )
        assert scheduled.json()["publishing"]["status"] == "scheduled", scheduled.text

        def published(events: list[dict[str, Any]]) -> bool:
            return any(e["unitId"] == unit["id"] and e["type"] == "unit.published" for e in events)

        await follow(fleet, start, published)
        await asyncio.sleep(1.5)  # a second publication would have happened by now
        events = await follow(fleet, start, published)
        history = (await a.get(f"{UNITS}{unit['id']}/history")).json()["data"]
        now = (await b.get(f"{UNITS}{unit['id']}")).json()
    assert [e["type"] for e in events if e["unitId"] == unit["id"]] == [
        "unit.created",
        "unit.scheduled",
        "unit.published",
    ]
    assert [entry["action"] for entry in history].count("publish") == 1
    assert now["publishing"]["status"] == "published" and now["version"] == 3


async def test_a_feed_follower_through_both_machines_sees_every_event_once(
    fleet: Fleet,
) -> None:
    start = await feed_end(fleet)
    project = f"fleet-{uuid.uuid4().hex[:10]}"
    written: list[tuple[str, int]] = []

    async def write(base: str, count: int) -> None:
        async with fleet.client(base) as client:
            for index in range(count):
                body = {"name": f"Unit {index}", "type": "villa", "subProjectId": project}
                unit = (await client.post(UNITS, json=body)).json()
                written.append((unit["id"], unit["version"]))
                patched = await client.patch(f"{UNITS}{unit['id']}", json={"price": index + 1})
                assert patched.status_code == 200, patched.text
                written.append((unit["id"], patched.json()["version"]))

    writers = asyncio.gather(*(write(base, 15) for base in (fleet.a, fleet.b, fleet.a, fleet.b)))

    def complete(events: list[dict[str, Any]]) -> bool:
        if not writers.done():
            return False
        writers.result()  # a writer's failure, rather than a wait for events never written
        return {(e["unitId"], e["version"]) for e in events} >= set(written)

    # small pages, so the follower reads while the writers write
    events = await follow(fleet, start, complete, limit=7)
    await writers
    assert len(written) == 120
    counts = Counter(event["id"] for event in events)
    assert set(counts.values()) == {1}, "an event was read twice"
    units = {unit_id for unit_id, _ in written}
    ours = [(e["unitId"], e["version"]) for e in events if e["unitId"] in units]
    assert sorted(ours) == sorted(written)
    for unit_id in units:
        versions = [version for seen_id, version in ours if seen_id == unit_id]
        assert versions == [1, 2]
