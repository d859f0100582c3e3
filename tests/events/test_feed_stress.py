"""The change feed's guarantee under load: two server processes on one PostgreSQL, concurrent
writers of every kind, and followers paging the feed while the writes commit.

Checked without timing: every follower reads every event exactly once, in the same order as
a final full read; a unit's versions are contiguous and in order; every acknowledged write's
event is in the feed, after the events of every write acknowledged before it was sent; and
a follower that reaches the end has every event of the writes acknowledged before it asked.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import httpx
import pytest
from sqlalchemy.engine import make_url

from tests.conftest import READY_UNIT, cli_admin_key, fresh_postgres
from tests.processes import serving
from tests.test_cli import free_port
from units_api.migrate import upgrade

FEED = "/api/v2/events"
POOL = 40
WRITERS = 8
FOLLOWERS = 3
OPERATIONS = 60  # per writer
WRITE_SECONDS = 20  # a bound on a slow machine, not an expectation
RUN_SECONDS = 45  # the whole workload, drains included
COMMIT_DELAY_US = 2000

Key = tuple[str, int]  # (unitId, version)


@dataclass
class Write:
    """An acknowledged write and the events it must have made."""

    what: str
    prior: int  # writes acknowledged before this one was sent
    keys: list[Key] = field(default_factory=list)
    marker: str | None = None  # a filter bulk's events: `location` changed to this
    updated: int = 0


@dataclass
class Load:
    servers: list[httpx.AsyncClient]
    pool: list[str]
    scope: str
    acks: list[Write] = field(default_factory=list)
    statuses: Counter[tuple[str, int]] = field(default_factory=Counter)
    unexpected: list[str] = field(default_factory=list)
    fresh: list[str] = field(default_factory=list)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    counter: Iterator[int] = field(default_factory=itertools.count)

    def value(self) -> int:
        return next(self.counter)


@dataclass
class Follower:
    events: list[dict[str, Any]] = field(default_factory=list)
    keys: set[Key] = field(default_factory=set)
    markers: Counter[str] = field(default_factory=Counter)
    checked: int = 0
    requests: int = 0
    late: list[str] = field(default_factory=list)  # acknowledged, absent when at the end


async def slow_commits(url: str) -> None:
    """Every commit of the database waits COMMIT_DELAY_US before its flush, as on a slow
    disk: a transaction's events, their insert-time numbers taken, stay unseen for longer,
    which is the window where a cursor over those numbers skips them. commit_delay needs a
    superuser; without one the test runs at the disk's own speed."""
    conn = await asyncpg.connect(url)
    name = make_url(url).database
    try:
        await conn.execute(f'ALTER DATABASE "{name}" SET commit_delay = {COMMIT_DELAY_US}')
        await conn.execute(f'ALTER DATABASE "{name}" SET commit_siblings = 0')
    except asyncpg.InsufficientPrivilegeError:
        pass
    finally:
        await conn.close()


@pytest.fixture
def two_servers(tmp_path: Path) -> Iterator[tuple[list[str], str]]:
    """Two server processes on a PostgreSQL database of their own, and an admin key."""
    with fresh_postgres("units_feed_stress") as url:
        upgrade(url)
        asyncio.run(slow_commits(url))
        env = {
            **os.environ,
            "UNITS_API_DATABASE_URL": url,
            "UNITS_API_ACCESS_LOG": "false",
            "UNITS_API_RATE_LIMIT": "1000000/minute",
            "UNITS_API_JOBS_INTERVAL_SECONDS": "0.2",
        }
        env.pop("UNITS_API_REDIS_URL", None)
        key = cli_admin_key(env)
        with ExitStack() as stack:
            bases = [
                stack.enter_context(serving(env, free_port(), tmp_path / f"server{i}.log"))
                for i in range(2)
            ]
            yield bases, key


def in_an_hour() -> str:
    return (datetime.now(UTC) + timedelta(hours=1)).isoformat().replace("+00:00", "Z")


async def write(
    load: Load, client: httpx.AsyncClient, what: str, method: str, url: str, body: Any
) -> tuple[Write, httpx.Response]:
    pending = Write(what, prior=len(load.acks))
    response = await client.request(method, url, json=body)
    load.statuses[(what, response.status_code)] += 1
    return pending, response


def acknowledge(load: Load, pending: Write, response: httpx.Response, ok: int) -> bool:
    if response.status_code == ok:
        return True
    if response.status_code == 409 and pending.what in {"publish", "availability"}:
        return False
    load.unexpected.append(f"{pending.what}: {response.status_code} {response.text[:300]}")
    return False


async def writer(load: Load, number: int, deadline: float) -> None:
    rng = random.Random(number)
    mine: dict[str, int] = {}  # this writer's own fresh units and their versions
    loop = asyncio.get_running_loop()
    for step in range(OPERATIONS):
        if loop.time() > deadline:
            return
        client = load.servers[(number + step) % 2]
        roll = rng.random()
        body: dict[str, Any]
        if roll < 0.35:
            unit_id = rng.choice(load.pool)
            body = {"price": 1_000_000 + load.value()}
            pending, response = await write(
                load, client, "patch", "PATCH", f"/api/v2/units/{unit_id}", body
            )
            if acknowledge(load, pending, response, 200):
                pending.keys.append((unit_id, response.json()["version"]))
        elif roll < 0.45:
            body = {**READY_UNIT, "subProjectId": f"{load.scope}-fresh", "price": 1 + load.value()}
            pending, response = await write(load, client, "create", "POST", "/api/v2/units/", body)
            if acknowledge(load, pending, response, 201):
                created = response.json()
                mine[created["id"]] = created["version"]
                load.fresh.append(created["id"])
                pending.keys.append((created["id"], created["version"]))
        elif roll < 0.50 and mine:
            unit_id = rng.choice(sorted(mine))
            if rng.random() < 0.5:
                body = {"name": f"Own {load.value()}"}
                pending, response = await write(
                    load, client, "own-patch", "PATCH", f"/api/v2/units/{unit_id}", body
                )
                if acknowledge(load, pending, response, 200):
                    mine[unit_id] = response.json()["version"]
                    pending.keys.append((unit_id, mine[unit_id]))
            else:
                pending, response = await write(
                    load, client, "delete", "DELETE", f"/api/v2/units/{unit_id}", None
                )
                if acknowledge(load, pending, response, 204):
                    pending.keys.append((unit_id, mine.pop(unit_id) + 1))
        elif roll < 0.65:
            chosen = rng.sample(load.pool, rng.randint(2, 6))
            tag = load.value()
            body = {
                "atomic": rng.random() < 0.5,
                "units": [
                    {"id": unit_id, "location": f"ids-{tag}-{i}"}
                    for i, unit_id in enumerate(chosen)
                ],
            }
            pending, response = await write(
                load, client, "bulk-ids", "PUT", "/api/v2/units/bulk/update", body
            )
            if acknowledge(load, pending, response, 200):
                results = response.json()["results"]
                if [r["status"] for r in results] != [200] * len(chosen):
                    load.unexpected.append(f"bulk-ids items: {results}")
                pending.keys += [(r["id"], r["version"]) for r in results if r["status"] == 200]
        elif roll < 0.67:
            marker = f"filter-{load.value()}"
            body = {"filter": f"subProjectId=={load.scope}", "patch": {"location": marker}}
            pending, response = await write(
                load, client, "bulk-filter", "PUT", "/api/v2/units/bulk/update", body
            )
            if acknowledge(load, pending, response, 200):
                pending.marker = marker
                pending.updated = response.json()["updated"]
                if response.json() != {"matched": POOL, "updated": POOL}:
                    load.unexpected.append(f"bulk-filter: {response.json()}")
        elif roll < 0.85:
            unit_id = rng.choice(load.pool)
            pending, response = await write(
                load,
                client,
                "publish",
                "PUT",
                f"/api/v2/units/publishing-actions/{unit_id}",
                {"action": "publish"},
            )
            if acknowledge(load, pending, response, 200):
                pending.keys.append((unit_id, response.json()["version"]))
        else:
            unit_id = rng.choice(load.pool)
            action: dict[str, Any] = (
                {"action": "reserve", "until": in_an_hour()}
                if rng.random() < 0.5
                else {"action": "release"}
            )
            pending, response = await write(
                load,
                client,
                "availability",
                "PUT",
                f"/api/v2/units/availability-actions/{unit_id}",
                action,
            )
            if acknowledge(load, pending, response, 200):
                pending.keys.append((unit_id, response.json()["version"]))
        if pending.keys or pending.marker:
            load.acks.append(pending)
        await asyncio.sleep(rng.uniform(0, 0.04))  # room for the followers to keep up


def unit_change(event: dict[str, Any]) -> Key | None:
    return None if event["unitId"] is None else (event["unitId"], event["version"])


def marker_of(event: dict[str, Any]) -> str | None:
    location = event["data"].get("changes", {}).get("location", {}).get("to")
    return location if isinstance(location, str) and location.startswith("filter-") else None


async def follower(load: Load, number: int) -> Follower:
    rng = random.Random(1000 + number)
    seen = Follower()
    after: str | None = None
    behind = True
    while True:
        finished = load.done.is_set()
        known = len(load.acks)
        limit = 20 if behind else rng.randint(1, 20)
        params: dict[str, Any] = {"limit": limit}
        if after is not None:
            params["after"] = after
        client = load.servers[seen.requests % 2]
        seen.requests += 1
        response = await client.get(FEED, params=params)
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["nextCursor"] is not None
        for event in body["data"]:
            seen.events.append(event)
            key = unit_change(event)
            if key is not None:
                seen.keys.add(key)
            marker = marker_of(event)
            if marker is not None:
                seen.markers[marker] += 1
        after = body["nextCursor"]
        behind = len(body["data"]) == limit
        if not behind:  # at the end: every write acknowledged before is in
            for pending in load.acks[seen.checked : known]:
                missing = [k for k in pending.keys if k not in seen.keys]
                if pending.marker and seen.markers[pending.marker] < pending.updated:
                    missing.append((pending.marker, pending.updated))
                if missing:
                    seen.late.append(f"{pending.what} {missing}")
            seen.checked = max(seen.checked, known)
            if finished:
                return seen
            await asyncio.sleep(0.005)


async def read_all(client: httpx.AsyncClient) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    params: dict[str, Any] = {"limit": 1000}
    while True:
        response = await client.get(FEED, params=params)
        assert response.status_code == 200, response.text
        body = response.json()
        found += body["data"]
        if not body["data"]:
            return found
        params["after"] = body["nextCursor"]


def version_problems(events: list[dict[str, Any]]) -> list[str]:
    """Per unit: versions strictly increasing in feed order, and contiguous from the first."""
    versions: dict[str, list[int]] = defaultdict(list)
    for event in events:
        if event["unitId"] is not None:
            versions[event["unitId"]].append(event["version"])
    problems = []
    for unit_id, seen in versions.items():
        if any(b <= a for a, b in itertools.pairwise(seen)):
            problems.append(f"{unit_id}: out of order {seen}")
        elif seen[0] == 1 and seen != list(range(1, len(seen) + 1)):
            problems.append(f"{unit_id}: gaps {seen}")
    return problems


async def test_followers_see_every_event_once_in_order_under_concurrent_writes(
    two_servers: tuple[list[str], str],
) -> None:
    bases, key = two_servers
    headers = {"Authorization": f"Bearer {key}"}
    timeout = httpx.Timeout(30)
    async with (
        httpx.AsyncClient(base_url=bases[0], headers=headers, timeout=timeout) as first,
        httpx.AsyncClient(base_url=bases[1], headers=headers, timeout=timeout) as second,
    ):
        servers = [first, second]
        scope = f"stress-{uuid.uuid4().hex[:8]}"

        async def create(i: int) -> str:
            body = {**READY_UNIT, "subProjectId": scope}
            response = await servers[i % 2].post("/api/v2/units/", json=body)
            assert response.status_code == 201, response.text
            unit_id: str = response.json()["id"]
            return unit_id

        pool = list(await asyncio.gather(*(create(i) for i in range(POOL))))
        load = Load(servers, pool, scope)
        loop = asyncio.get_running_loop()

        async def run() -> list[Follower]:
            followers = [asyncio.create_task(follower(load, i)) for i in range(FOLLOWERS)]
            deadline = loop.time() + WRITE_SECONDS
            try:
                await asyncio.gather(*(writer(load, i, deadline) for i in range(WRITERS)))
                load.done.set()
                return list(await asyncio.gather(*followers))
            finally:
                for task in followers:
                    task.cancel()

        followers = await asyncio.wait_for(run(), RUN_SECONDS)
        whole = await read_all(first)
        again = await read_all(second)
        current: dict[str, int | None] = {}
        for unit_id in [*pool, *load.fresh]:
            response = await servers[len(current) % 2].get(f"/api/v2/units/{unit_id}")
            current[unit_id] = response.json()["version"] if response.status_code == 200 else None

    ids = [event["id"] for event in whole]
    assert [event["id"] for event in again] == ids
    assert len(set(ids)) == len(ids)
    writes = sum(count for (_, status), count in load.statuses.items() if status < 300)
    print(
        f"\n{len(ids)} events; {writes} writes acknowledged; statuses "
        f"{dict(sorted(load.statuses.items()))}; follower requests "
        f"{[f.requests for f in followers]}"
    )
    assert load.unexpected == []
    assert len(load.acks) >= WRITERS * 10  # the workload really ran

    reports: list[str] = []
    failing = False
    for number, seen in enumerate(followers):
        mine = [event["id"] for event in seen.events]
        repeated = sum(n - 1 for n in Counter(mine).values())
        missed = len(set(ids) - set(mine))
        disordered = version_problems(seen.events)
        reports.append(
            f"follower {number}: read {len(mine)} of {len(ids)} in {seen.requests} pages, "
            f"{repeated} repeated, {missed} missed, {len(disordered)} units with versions "
            f"out of order or with gaps, {len(seen.late)} acknowledged writes absent at "
            f"the end of the feed, {'same' if mine == ids else 'another'} order"
        )
        failing = failing or bool(repeated or missed or disordered or seen.late or mine != ids)
    print("\n".join(reports))
    assert not failing, "\n".join(reports)

    # Every unit's events, from its creation to its current version (or deletion).
    assert version_problems(whole) == []
    first_version: dict[str, int] = {}
    last: dict[str, dict[str, Any]] = {}
    for event in whole:
        if event["unitId"] is not None:
            first_version.setdefault(event["unitId"], event["version"])
            last[event["unitId"]] = event
    assert set(first_version.values()) == {1}
    for unit_id, version in current.items():
        if version is None:
            assert last[unit_id]["type"] == "unit.deleted"
        else:
            assert last[unit_id]["version"] == version, unit_id

    # Every acknowledged write has its events, after those of every write acknowledged
    # before it was sent.
    where: dict[Key, int] = {}
    markers: dict[str, list[int]] = defaultdict(list)
    for index, event in enumerate(whole):
        change = unit_change(event)
        if change is not None:
            where[change] = index
        marker = marker_of(event)
        if marker is not None:
            markers[marker].append(index)
    missing: list[str] = []
    misplaced: list[str] = []
    latest = -1  # the last feed index among the events of the writes acknowledged so far
    ends: list[int] = []  # ends[i]: that index over the first i acknowledged writes
    for pending in load.acks:
        ends.append(latest)
        places = [where[k] for k in pending.keys if k in where]
        if len(places) < len(pending.keys):
            missing.append(f"{pending.what} {[k for k in pending.keys if k not in where]}")
        if pending.marker is not None:
            found = markers.get(pending.marker, [])
            if len(found) != pending.updated:
                missing.append(f"{pending.what} {pending.marker}: {len(found)} events")
            places += found
        if places and min(places) <= ends[pending.prior]:
            misplaced.append(pending.what)
        latest = max([latest, *places])
    assert missing == [], f"{len(missing)} acknowledged writes without their events"
    assert misplaced == [], f"{len(misplaced)} writes' events before earlier writes' events"
