"""SQLite's one writer (`writer.py`): concurrent write transactions share a commit, and each
has the outcome it would have had alone.

On real SQLite files: a batch mixing good and bad writes commits the good ones and answers
each as if alone, with its own history, event and idempotency record, the feed's positions
in commit order without gaps; a body that raises or is cancelled after writing leaves
nothing and spoils no other; reads are answered while a batch is held open; a write
transaction opened inside another fails at once; concurrent writes on a full disk are each a
507 or kept; and a server killed (SIGKILL) under concurrent writes loses no acknowledged write
and repeats none.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from tests import test_storage_faults
from tests.conftest import Api, start_api, stop_server, unit_body, wait_until_ready
from tests.test_cli import free_port
from tests.test_storage_faults import Disk
from units_api.auth.schemas import ApiKeyCreate
from units_api.auth.service import create_key
from units_api.auth.tables import api_keys
from units_api.config import Settings
from units_api.db import Database, unbounded
from units_api.http.json import dumps
from units_api.migrate import upgrade
from units_api.writer import NestedWrite

JSON = {"content-type": "application/json"}

# A small tmpfs of the test's own, and a database on it.
disk = test_storage_faults.disk
database_on_disk = test_storage_faults.database_on_disk
UNITS = "/api/v2/units/"


@pytest.fixture
def own_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'units.db'}"
    upgrade(url)
    return url


@pytest.fixture
async def api(own_url: str, files_dir: str) -> AsyncIterator[Api]:
    """The app on a SQLite file of the test's own (its feed and counters start empty)."""
    url = own_url
    settings = Settings(database_url=url, access_log=False, db_pool_size=5, files_dir=files_dir)
    async for instance in start_api(settings):
        yield instance


def database_file(api: Api) -> str:
    database = api.context.db.engine.url.database
    assert database is not None
    return database


def stored(api: Api, sql: str, *parameters: Any) -> list[tuple[Any, ...]]:
    """Rows read by a connection of the test's own, as another process would see them."""
    with sqlite3.connect(database_file(api)) as conn:
        return conn.execute(sql, parameters).fetchall()


async def test_a_batch_commits_the_good_writes_and_answers_each_as_if_alone(api: Api) -> None:
    project = f"b-{uuid.uuid4().hex[:8]}"
    first = await api.create_unit(subProjectId=project, price=1000)
    second = await api.create_unit(subProjectId=project, price=2000)
    stale = await api.request(
        "PATCH",
        f"{UNITS}{second['id']}",
        json={"price": 2100},
        headers={"content-type": "application/merge-patch+json"},
    )
    assert stale.status_code == 200
    writer = api.context.db.writer
    assert writer is not None
    commits, members = writer.commits, writer.members
    key = f"k-{uuid.uuid4().hex}"

    def post(body: dict[str, Any], **headers: str) -> Awaitable[httpx.Response]:
        return api.request("POST", UNITS, content=dumps(body), headers={**JSON, **headers})

    def patch(unit: dict[str, Any], price: int, version: int) -> Awaitable[httpx.Response]:
        return api.request(
            "PATCH",
            f"{UNITS}{unit['id']}",
            json={"price": price},
            headers={"content-type": "application/merge-patch+json", "if-match": f'"{version}"'},
        )

    good = [post(unit_body(subProjectId=project, name=f"Good {i}")) for i in range(8)]
    bad = [post(unit_body(subProjectId=project, price=-5)) for _ in range(4)]
    keyed = [post(unit_body(subProjectId=project, name="Keyed"), **{"idempotency-key": key})]
    answers = await asyncio.gather(
        *good,
        *bad,
        *keyed,
        patch(first, 1500, 1),  # current: 1
        patch(second, 2500, 1),  # stale: second is at 2
    )
    created, refused = answers[:8], answers[8:12]
    keyed_answer, fresh, stale_answer = answers[12], answers[13], answers[14]
    assert [r.status_code for r in created] == [201] * 8
    assert [r.status_code for r in refused] == [422] * 4
    assert all(r.headers["content-type"] == "application/problem+json" for r in refused)
    assert keyed_answer.status_code == 201
    assert fresh.status_code == 200 and fresh.json()["price"] == 1500
    assert stale_answer.status_code == 412
    # The writes that succeeded (8 creates, a PATCH, the keyed create and its claim) shared
    # fewer commits than one each: the creates and the PATCH were gathered into turns of a
    # few (units/gathering.py), the keyed create and its claim took turns of their own.
    assert writer.members - members >= 3
    assert writer.commits - commits < 11

    replay = await post(unit_body(subProjectId=project, name="Keyed"), **{"idempotency-key": key})
    assert replay.status_code == 201
    assert replay.headers["idempotent-replayed"] == "true"
    assert replay.json()["id"] == keyed_answer.json()["id"]

    ids = {r.json()["id"] for r in [*created, keyed_answer]}
    listed = await api.request("GET", f"{UNITS}?p=subProjectId=={project}&limit=100")
    assert {u["id"] for u in listed.json()["data"]} == ids | {first["id"], second["id"]}
    for unit_id in ids:
        history = await api.request("GET", f"{UNITS}{unit_id}/history")
        assert [entry["version"] for entry in history.json()["data"]] == [1]
    await assert_feed_in_commit_order(api)


async def assert_feed_in_commit_order(api: Api) -> None:
    """Every unit's events in the feed, once, in version order, at gapless positions that
    follow the order in which they were written."""
    positions = stored(
        api, "SELECT p.pos FROM events e JOIN event_positions p ON p.seq = e.seq ORDER BY e.seq"
    )
    assert [p for (p,) in positions] == list(range(1, len(positions) + 1))
    feed = await api.request("GET", "/api/v2/events?limit=1000")
    events = feed.json()["data"]
    assert len(events) == len(positions)
    versions: dict[str, list[int]] = {}
    for each in events:
        versions.setdefault(each["unitId"], []).append(each["version"])
    assert all(v == list(range(1, len(v) + 1)) for v in versions.values())


async def a_key(conn: Any, name: str) -> None:
    await create_key(conn, ApiKeyCreate(name=name, scopes=["units:read"]))


def key_names(api: Api, prefix: str) -> list[str]:
    return sorted(
        n for (n,) in stored(api, "SELECT name FROM api_keys WHERE name LIKE ?", prefix + "%")
    )


async def run_together(
    db: Database, bodies: list[Callable[[Any], Awaitable[None]]], long: bool
) -> list[BaseException | None]:
    """Each body in a write transaction of its own, all started together; each one's error."""

    async def one(body: Callable[[Any], Awaitable[None]]) -> None:
        async with db.transaction(long=long) as conn:
            await body(conn)

    results = await asyncio.gather(*(one(body) for body in bodies), return_exceptions=True)
    return [r if isinstance(r, BaseException) else None for r in results]


# A request's statements run on the loop's thread; long work's and background work's on the
# driver's.
MODES = ["request", "long", "background"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_body_that_fails_after_writing_leaves_nothing_and_spoils_no_other(
    api: Api, mode: str
) -> None:
    db = api.context.db
    writer = db.writer
    assert writer is not None
    prefix = f"p-{uuid.uuid4().hex[:8]}-"

    async def fails(conn: Any) -> None:
        await a_key(conn, prefix + "failed")
        raise ValueError("refused after writing")

    async def succeeds(conn: Any) -> None:
        await a_key(conn, prefix + "kept")

    async def scenario() -> list[BaseException | None]:
        if mode == "background":
            unbounded()
        return await run_together(db, [succeeds, fails, succeeds], mode == "long")

    commits = writer.commits
    errors = await asyncio.create_task(scenario())
    assert [type(e).__name__ if e else None for e in errors] == [None, "ValueError", None]
    assert key_names(api, prefix) == [prefix + "kept", prefix + "kept"]
    assert writer.commits - commits == 1


@pytest.mark.parametrize("mode", MODES)
async def test_a_cancelled_body_leaves_nothing_and_the_others_commit(api: Api, mode: str) -> None:
    db = api.context.db
    prefix = f"c-{uuid.uuid4().hex[:8]}-"
    holding = asyncio.Event()

    async def held(conn: Any) -> None:
        await a_key(conn, prefix + "cancelled")
        holding.set()
        await asyncio.Event().wait()  # until cancelled, as a client gone mid-request

    async def succeeds(conn: Any) -> None:
        await a_key(conn, prefix + "kept")

    async def one(body: Callable[[Any], Awaitable[None]]) -> None:
        if mode == "background":
            unbounded()
        async with db.transaction(long=mode == "long") as conn:
            await body(conn)

    cancelled = asyncio.create_task(one(held))
    await holding.wait()
    others = [asyncio.create_task(one(succeeds)) for _ in range(3)]
    await asyncio.sleep(0.05)
    cancelled.cancel()
    await asyncio.gather(*others)
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert key_names(api, prefix) == [prefix + "kept"] * 3
    await api.create_unit()  # and the writer goes on


async def test_reads_are_answered_while_a_batch_is_held_open(api: Api) -> None:
    db = api.context.db
    unit = await api.create_unit(name="Read Me")
    holding, release = asyncio.Event(), asyncio.Event()

    async def long_write() -> None:
        async with db.transaction() as conn:
            await a_key(conn, f"long-{uuid.uuid4().hex[:8]}")
            holding.set()
            await release.wait()

    writing = asyncio.create_task(long_write())
    await holding.wait()
    one = await api.request("GET", f"{UNITS}{unit['id']}")
    listed = await api.request("GET", f"{UNITS}?limit=5")
    feed = await api.request("GET", "/api/v2/events")
    assert (one.status_code, listed.status_code, feed.status_code) == (200, 200, 200)
    assert one.json()["name"] == "Read Me"
    assert not writing.done()
    release.set()
    await writing


async def test_a_write_transaction_inside_another_fails_at_once(api: Api) -> None:
    db = api.context.db
    prefix = f"n-{uuid.uuid4().hex[:8]}-"
    with pytest.raises(NestedWrite):
        async with db.transaction() as conn:
            await a_key(conn, prefix + "outer")
            async with db.transaction():
                pass
    assert key_names(api, prefix) == []
    async with db.transaction() as conn:
        found = (await conn.execute(select(api_keys.c.id).limit(1))).first()
    assert found is not None


# A real server killed under concurrent writes.

CLIENTS = 16


def serve(database: Path, files: Path, log: Path) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    env = {
        **os.environ,
        "UNITS_API_DATABASE_URL": f"sqlite:///{database}",
        "UNITS_API_ACCESS_LOG": "false",
        "UNITS_API_FILES_DIR": str(files),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "units_api", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=log.open("a"),
        text=True,
        cwd=database.parent,
    )
    base = f"http://127.0.0.1:{port}"
    wait_until_ready(base)
    return process, base


async def test_a_server_killed_under_concurrent_writes_loses_no_acknowledged_write(
    tmp_path: Path,
) -> None:
    database, files, log = tmp_path / "units.db", tmp_path / "files", tmp_path / "server.log"
    process, base = serve(database, files, log)
    assert process.stdout is not None
    process.stdout.readline()
    key = await asyncio.to_thread(process.stdout.readline)
    headers = {"Authorization": f"Bearer {key.strip()}", **JSON}
    acknowledged: dict[str, str] = {}  # Idempotency-Key: the unit created
    unanswered: list[str] = []
    stop, enough = asyncio.Event(), asyncio.Event()

    async def client(number: int, http: httpx.AsyncClient) -> None:
        count = 0
        while not stop.is_set():
            count += 1
            token = f"kill-{number}-{count}"
            body = dumps(unit_body(name=f"Kill {number}-{count}"))
            try:
                response = await http.post(
                    f"{base}{UNITS}", content=body, headers={**headers, "idempotency-key": token}
                )
            except httpx.HTTPError:
                unanswered.append(token)
                return
            assert response.status_code == 201, response.text
            acknowledged[token] = response.json()["id"]
            if len(acknowledged) >= 300:
                enough.set()

    async with httpx.AsyncClient(timeout=30) as http:
        clients = [asyncio.create_task(client(n, http)) for n in range(CLIENTS)]
        await enough.wait()
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
        stop.set()
        await asyncio.gather(*clients)

    assert unanswered  # the kill cut writes off
    with sqlite3.connect(database) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        kept = {row[0] for row in conn.execute("SELECT id FROM units")}
    created = {uuid.UUID(unit_id).hex for unit_id in acknowledged.values()}
    assert created <= kept
    assert len(kept) <= len(created) + len(unanswered)

    process, base = serve(database, files, log)
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            for token, unit_id in list(acknowledged.items())[:: max(1, len(acknowledged) // 40)]:
                replayed = await http.post(
                    f"{base}{UNITS}",
                    content=dumps(unit_body(name=f"Kill {token[5:]}")),
                    headers={**headers, "idempotency-key": token},
                )
                assert replayed.status_code == 201, replayed.text
                assert replayed.headers["idempotent-replayed"] == "true"
                assert replayed.json()["id"] == unit_id
            feed = await http.get(f"{base}/api/v2/events?limit=1000", headers=headers)
            assert feed.status_code == 200
    finally:
        stop_server(process)
    with sqlite3.connect(database) as conn:
        assert conn.execute("SELECT count(*) FROM units").fetchone() == (len(kept),)
        events = conn.execute(
            "SELECT p.pos FROM events e JOIN event_positions p ON p.seq = e.seq ORDER BY p.pos"
        )
        positions = [p for (p,) in events]
        assert len(positions) >= len(kept)
        created_events = conn.execute("SELECT count(*) FROM events WHERE type = 'unit.created'")
        assert created_events.fetchone() == (len(kept),)
    assert positions == list(range(1, len(positions) + 1))


async def test_concurrent_writes_on_a_full_disk_are_507s_and_keep_every_acknowledged_one(
    disk: Disk, database_on_disk: Path, files_dir: str
) -> None:
    settings = Settings(
        database_url=f"sqlite:///{database_on_disk}", access_log=False, files_dir=files_dir
    )
    project = f"full-{uuid.uuid4().hex[:8]}"
    acknowledged: list[str] = []
    async for api in start_api(settings):
        acknowledged += [(await api.create_unit(subProjectId=project))["id"] for _ in range(3)]
        disk.fill()
        statuses: list[int] = []
        for _ in range(20):  # until the pages SQLite had free are used up
            answers = await asyncio.gather(
                *(
                    api.request(
                        "POST", UNITS, content=dumps(unit_body(subProjectId=project)), headers=JSON
                    )
                    for _ in range(8)
                )
            )
            statuses += [a.status_code for a in answers]
            acknowledged += [a.json()["id"] for a in answers if a.status_code == 201]
            if 507 in statuses:
                break
        assert set(statuses) <= {201, 507} and 507 in statuses
        disk.free()
        assert (await api.request("GET", f"{UNITS}{acknowledged[-1]}")).status_code == 200
        acknowledged.append((await api.create_unit(subProjectId=project))["id"])
    with sqlite3.connect(database_on_disk) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        kept = conn.execute("SELECT id FROM units WHERE sub_project_id = ?", (project,))
        assert {row[0] for row in kept} == {uuid.UUID(i).hex for i in acknowledged}
