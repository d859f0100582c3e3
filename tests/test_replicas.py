"""Read replicas against a real PostgreSQL streaming replica made for these tests: a throwaway
primary and standby in temporary directories, on free ports, run as the `postgres` user when
the tests run as root. Lists, searches, the query endpoint and exports read from the replica;
a replica stopped, or paused past the lag limit, is skipped; a primary given as a replica is
refused at start."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from bench.replica_pair import Pair, caught_up, sql
from sqlalchemy.exc import OperationalError, PendingRollbackError
from sqlalchemy.ext.asyncio import AsyncConnection

from tests.clusters import frozen, throwaway_pair
from tests.conftest import Api, start_api
from tests.test_cli import free_port
from units_api.config import Settings
from units_api.db import Database, create_engine
from units_api.errors import SettingError
from units_api.http.json import dumps
from units_api.replicas import SETTING, ReplicaSet, refuse_unusable, unreachable

UNITS = "/api/v2/units/"
REPLICA = "replica-1"


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    with throwaway_pair() as made:
        yield made


@pytest.fixture
async def replica(pair: Pair) -> AsyncIterator[Pair]:
    """The pair with its standby running, replaying and caught up, before and after a test."""

    async def ready() -> None:
        if not pair.standby_running():
            pair.start(pair.standby_dir)
        if await sql(pair.standby_url, "SELECT pg_is_wal_replay_paused()"):
            await sql(pair.standby_url, "SELECT pg_wal_replay_resume()")
        await caught_up(pair)

    await ready()
    yield pair
    await ready()


def _settings(pair: Pair, files_dir: str, max_lag: float, **extra: Any) -> Settings:
    return Settings(
        database_url=pair.primary_url,
        database_replica_urls=pair.standby_url,
        replica_max_lag_seconds=max_lag,
        access_log=False,
        db_pool_size=4,
        db_fast_pool_size=2,
        files_dir=files_dir,
        # The database's own aggregates are what read from a replica here: the dashboards'
        # copy answers from itself, kept in step with the primary's feed.
        dashboards_copy=False,
        **extra,
    )


@asynccontextmanager
async def _served(settings: Settings) -> AsyncIterator[Api]:
    async for api in start_api(settings):
        yield api


async def _reads(api: Api) -> dict[str, float]:
    """Reads by the database that served them, as /metrics shows them."""
    text = (await api.client.get("/metrics")).text
    found = re.findall(r'units_api_database_reads_total\{database="([^"]+)"\} (\S+)', text)
    return {name: float(value) for name, value in found}


async def _read_by(api: Api, before: dict[str, float]) -> set[str]:
    """The databases that served reads since `before`."""
    after = await _reads(api)
    return {name for name, value in after.items() if value > before.get(name, 0.0)}


async def _names(api: Api, tag: str) -> set[str]:
    """The names of the units tagged `tag`, as the list reads them."""
    response = await api.request("GET", UNITS, params={"p": f"subProjectId=={tag}"})
    assert response.status_code == 200, response.text
    return {unit["name"] for unit in response.json()["data"]}


async def _until(check: Callable[[], Awaitable[bool]], seconds: float = 15) -> None:
    deadline = time.monotonic() + seconds
    while not await check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.1)


async def _create(api: Api, name: str, tag: str) -> dict[str, Any]:
    return await api.create_unit(name=name, subProjectId=tag, price=1000000)


async def test_lists_searches_and_queries_read_from_the_replica(
    replica: Pair, files_dir: str
) -> None:
    tag = f"rep-{uuid.uuid4().hex[:10]}"
    async with _served(_settings(replica, files_dir, max_lag=60, run_jobs=False)) as api:
        await _create(api, "Seen Villa", tag)
        await _until(lambda: _has(api, tag, "Seen Villa"))
        # Replay paused: what is written now stays on the primary, within the lag limit.
        await sql(replica.standby_url, "SELECT pg_wal_replay_pause()")
        unseen = await _create(api, "Unseen Villa", tag)
        one = await api.request("GET", f"{UNITS}{unseen['id']}")
        assert one.status_code == 200  # one unit's read: the primary
        before = await _reads(api)
        assert await _names(api, tag) == {"Seen Villa"}
        search = await api.request("GET", UNITS, params={"q": "villa", "p": f"subProjectId=={tag}"})
        assert [u["name"] for u in search.json()["data"]] == ["Seen Villa"]
        query = await api.request("POST", f"{UNITS}query", json={"filter": f"subProjectId=={tag}"})
        assert [u["name"] for u in query.json()["data"]] == ["Seen Villa"]
        counted = await api.request(
            "POST",
            f"{UNITS}query",
            json={"filter": f"subProjectId=={tag}", "aggregates": {"n": {"fn": "count"}}},
        )
        assert counted.json()["data"] == [{"n": 1}]
        assert await _read_by(api, before) == {REPLICA}
        await sql(replica.standby_url, "SELECT pg_wal_replay_resume()")
        await _until(lambda: _has(api, tag, "Unseen Villa"))


async def _has(api: Api, tag: str, name: str) -> bool:
    return name in await _names(api, tag)


async def test_a_write_goes_to_the_primary_and_reaches_the_list(
    replica: Pair, files_dir: str
) -> None:
    tag = f"rep-{uuid.uuid4().hex[:10]}"
    async with _served(_settings(replica, files_dir, max_lag=60, run_jobs=False)) as api:
        made = await _create(api, "Written Villa", tag)  # the standby is read-only
        patched = await api.request(
            "PATCH",
            f"{UNITS}{made['id']}",
            content=dumps({"price": 2000000}),
            headers={"content-type": "application/merge-patch+json"},
        )
        assert patched.status_code == 200, patched.text

        async def priced() -> bool:
            response = await api.request("GET", UNITS, params={"p": f"subProjectId=={tag}"})
            return [u["price"] for u in response.json()["data"]] == [2000000]

        before = await _reads(api)
        await _until(priced)
        assert await _read_by(api, before) == {REPLICA}


async def test_a_replica_stopped_mid_test_leaves_reads_to_the_primary(
    replica: Pair, files_dir: str
) -> None:
    tag = f"rep-{uuid.uuid4().hex[:10]}"
    async with _served(_settings(replica, files_dir, max_lag=60, run_jobs=False)) as api:
        await _create(api, "Steady Villa", tag)
        await _until(lambda: _has(api, tag, "Steady Villa"))
        replica.stop(replica.standby_dir)
        before = await _reads(api)
        for _ in range(5):  # the first finds the replica's connections broken
            assert await _names(api, tag) == {"Steady Villa"}
            query = await api.request(
                "POST", f"{UNITS}query", json={"filter": f"subProjectId=={tag}"}
            )
            assert query.status_code == 200, query.text
        assert await _read_by(api, before) == {"primary"}
        await _create(api, "Later Villa", tag)
        assert await _names(api, tag) == {"Steady Villa", "Later Villa"}

        replica.start(replica.standby_dir)  # used again once a check finds it well
        replicas = api.context.db.replicas
        assert replicas is not None

        async def in_use() -> bool:
            return replicas.replicas[0].healthy

        await _until(in_use)
        before = await _reads(api)
        assert await _names(api, tag) == {"Steady Villa", "Later Villa"}
        assert await _read_by(api, before) == {REPLICA}


async def test_a_frozen_replica_leaves_reads_to_the_primary_within_the_bound(
    replica: Pair, files_dir: str
) -> None:
    """A standby stopped dead (SIGSTOP) answers nothing: a list on it gives up after
    UNITS_API_DB_UNAVAILABLE_SECONDS and runs again on the primary."""
    tag = f"rep-{uuid.uuid4().hex[:10]}"
    settings = _settings(replica, files_dir, max_lag=60, run_jobs=False, db_unavailable_seconds=1)
    async with _served(settings) as api:
        await _create(api, "Thawed Villa", tag)
        await _until(lambda: _has(api, tag, "Thawed Villa"))
        with frozen(replica.standby_dir):
            for _ in range(3):  # the first may wait on the replica, never longer than the bound
                names = await asyncio.wait_for(_names(api, tag), timeout=15)
                assert names == {"Thawed Villa"}


async def test_a_replica_past_the_lag_limit_is_skipped_until_it_catches_up(
    replica: Pair, files_dir: str
) -> None:
    tag = f"rep-{uuid.uuid4().hex[:10]}"
    async with _served(_settings(replica, files_dir, max_lag=1, run_jobs=False)) as api:
        replicas = api.context.db.replicas
        assert replicas is not None and replicas.replicas[0].healthy
        await sql(replica.standby_url, "SELECT pg_wal_replay_pause()")
        await _create(api, "Late Villa", tag)
        # Within a check or two past the limit the list is the primary's, with the new unit.
        await _until(lambda: _has(api, tag, "Late Villa"), seconds=10)
        assert not replicas.replicas[0].healthy
        before = await _reads(api)
        assert await _names(api, tag) == {"Late Villa"}
        assert await _read_by(api, before) == {"primary"}

        await sql(replica.standby_url, "SELECT pg_wal_replay_resume()")

        async def in_use() -> bool:
            return replicas.replicas[0].healthy

        await _until(in_use)
        before = await _reads(api)
        assert await _names(api, tag) == {"Late Villa"}
        assert await _read_by(api, before) == {REPLICA}


async def test_an_export_reads_from_the_replica(replica: Pair, files_dir: str) -> None:
    tag = f"rep-{uuid.uuid4().hex[:10]}"
    async with _served(_settings(replica, files_dir, max_lag=60)) as api:
        await _create(api, "Exported Villa", tag)
        await _until(lambda: _has(api, tag, "Exported Villa"))
        await sql(replica.standby_url, "SELECT pg_wal_replay_pause()")
        await _create(api, "Missing Villa", tag)
        asked = await api.request(
            "POST",
            f"{UNITS}exports",
            json={"format": "jsonl", "filter": f"subProjectId=={tag}"},
        )
        assert asked.status_code == 202, asked.text
        job: dict[str, Any] = {}

        async def done() -> bool:
            nonlocal job
            job = (await api.request("GET", f"{UNITS}exports/{asked.json()['id']}")).json()
            return job["status"] in ("succeeded", "failed")

        await _until(done, seconds=60)
        assert job["status"] == "succeeded", job
        file = await api.request("GET", f"{UNITS}exports/{job['id']}/file")
        assert file.status_code == 200, file.text
        assert b"Exported Villa" in file.content and b"Missing Villa" not in file.content
        assert job["rowCount"] == 1


async def test_a_read_that_fails_on_a_replica_runs_again_on_the_primary(replica: Pair) -> None:
    db = Database(create_engine(replica.primary_url, pool_size=2))

    async def in_recovery(conn: AsyncConnection) -> bool:
        return bool((await conn.exec_driver_sql("SELECT pg_is_in_recovery()")).scalar())

    try:
        await db.open_replicas([replica.standby_url], max_lag=60, pool_size=2, watch=False)
        assert db.replicas is not None
        assert await db.run_on_replica(in_recovery) is True
        async with db.snapshot(replica=True) as conn:
            assert await in_recovery(conn) is True
        replica.stop(replica.standby_dir)  # its pooled connections break under the next read
        assert await db.run_on_replica(in_recovery) is False
        assert not db.replicas.replicas[0].healthy  # no check ran: the read found it down
        async with db.snapshot(replica=True) as conn:
            assert await in_recovery(conn) is False
    finally:
        await db.dispose()


def _serve(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "units_api", "serve", "--port", str(free_port())],
        env={**os.environ, "UNITS_API_ACCESS_LOG": "false", **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_primary_given_as_a_replica_is_refused_at_start(pair: Pair, tmp_path: Path) -> None:
    refused = _serve(
        {
            "UNITS_API_DATABASE_URL": pair.primary_url,
            "UNITS_API_DATABASE_REPLICA_URLS": f"{pair.standby_url},{pair.primary_url}",
            "UNITS_API_FILES_DIR": str(tmp_path / "files"),
        }
    )
    assert refused.returncode == 2, refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {SETTING}: replica 2 "), lines
    assert "is not a replica" in lines[0] and "Traceback" not in refused.stderr


def test_replicas_with_a_sqlite_primary_are_refused_at_start(tmp_path: Path) -> None:
    refused = _serve(
        {
            "UNITS_API_DATABASE_URL": f"sqlite:///{tmp_path}/units.db",
            "UNITS_API_DATABASE_REPLICA_URLS": "postgresql://postgres@127.0.0.1:1/units",
            "UNITS_API_FILES_DIR": str(tmp_path / "files"),
        }
    )
    assert refused.returncode == 2, refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {SETTING}: "), lines
    assert "PostgreSQL" in lines[0]


async def test_an_app_given_a_primary_as_a_replica_does_not_start(
    pair: Pair, files_dir: str
) -> None:
    settings = _settings(pair, files_dir, max_lag=5, run_jobs=False)
    settings = settings.model_copy(update={"database_replica_urls": pair.primary_url})
    with pytest.raises(Exception, match="is not a replica"):
        async for _ in start_api(settings):
            pass


async def test_a_replica_of_another_database_is_refused_and_one_out_of_reach_is_not(
    pair: Pair,
) -> None:
    other_database = f"postgresql://postgres@127.0.0.1:{pair.standby_port}/template1"
    with pytest.raises(SettingError, match=r"replica 1 \(.*\) reads database 'template1'"):
        await refuse_unusable(pair.primary_url, [other_database])
    with pytest.raises(SettingError, match=r"replica 2 .* cannot be used: .*nobody"):
        await refuse_unusable(
            pair.primary_url, [pair.standby_url, pair.standby_url.replace("postgres@", "nobody@")]
        )
    away = pair.url(free_port())
    await refuse_unusable(pair.primary_url, [away, pair.standby_url])  # skipped, not refused


def test_lag_counts_from_when_the_primary_first_passed_the_replica() -> None:
    replicas = ReplicaSet("postgresql://primary/db", [], max_lag=5)
    replicas._remember(100, now=10.0)
    replicas._remember(100, now=11.0)  # idle: nothing new to replay
    assert replicas._lag(100, 100, replay_age=3600.0, now=11.0) == 0.0
    replicas._remember(150, now=12.0)
    replicas._remember(200, now=13.0)
    assert replicas._lag(100, 200, replay_age=3600.0, now=14.5) == 2.5  # missing 150 since 12
    assert replicas._lag(150, 200, replay_age=3600.0, now=14.5) == 1.5
    # Behind the oldest position seen: bounded by its last replayed transaction's age.
    assert replicas._lag(50, 200, replay_age=30.0, now=14.5) == 30.0
    replicas._remember(300, now=40.0)  # positions older than the limit and then some go
    assert [seen for _, seen in replicas._positions] == [13.0, 40.0]
    assert replicas._lag(250, 300, replay_age=None, now=40.5) == 0.5
    assert replicas._lag(150, 300, replay_age=None, now=40.5) == 27.5


def test_a_break_hidden_by_a_failed_clean_up_is_still_a_break() -> None:
    """A read whose connection broke, then whose clean-up failed on the broken connection,
    is run again on the primary: the clean-up's error does not hide the break."""
    broken = OperationalError("SELECT 1", {}, ConnectionResetError("reset by peer"))
    try:
        try:
            raise broken
        finally:
            raise PendingRollbackError("Can't reconnect until invalid transaction is rolled back")
    except PendingRollbackError as error:
        assert unreachable(error)
    assert not unreachable(PendingRollbackError("a statement's own fault"))
    assert not unreachable(ValueError("bad value"))
