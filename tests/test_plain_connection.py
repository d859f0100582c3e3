"""One operation on PostgreSQL's fast pool (`Database.operation`, `PlainConnection`): its
transaction begins at the first statement that needs one and ends with the operation,
committed or rolled back, and a connection goes back to the pool outside any transaction."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator

import pytest

from tests.conftest import Api, start_api
from tests.http.test_errors import assert_problem
from units_api.config import Settings
from units_api.db import Database, PlainConnection, create_engine, driver_connection
from units_api.sample_data import fake_unit
from units_api.units import service
from units_api.units.service import SystemCaller

BUMP = "UPDATE unit_counters SET changes = changes + $1 WHERE shard = 0"
READ = "SELECT changes FROM unit_counters WHERE shard = 0"
WHO = SystemCaller("test")


@pytest.fixture
async def db(postgres_url: str) -> AsyncIterator[Database]:
    database = Database(create_engine(postgres_url, pool_size=1))
    await database.open_fast_pool(2)
    yield database
    await database.dispose()


async def _counter(db: Database) -> int:
    assert db.fast_pool is not None
    value: int = await db.fast_pool.fetchval(READ)
    return value


async def test_a_clean_operation_commits_and_a_failed_one_rolls_back(db: Database) -> None:
    before = await _counter(db)
    async with db.operation() as conn:
        assert isinstance(conn, PlainConnection)
        driver = await driver_connection(conn)
        assert driver.is_in_transaction()
        await driver.execute(BUMP, 5)
    assert await _counter(db) == before + 5
    with pytest.raises(RuntimeError):
        async with db.operation() as conn:
            await (await driver_connection(conn)).execute(BUMP, 100)
            raise RuntimeError("the operation fails after its statement")
    assert await _counter(db) == before + 5
    async with db.operation() as conn:
        await (await driver_connection(conn)).execute(BUMP, -5)


async def test_a_statement_alone_runs_outside_any_transaction(db: Database) -> None:
    async with db.operation() as conn:
        assert isinstance(conn, PlainConnection)
        driver = await driver_connection(conn, alone=True)
        assert not driver.is_in_transaction() and conn.transaction is None
        await driver.fetchval(READ)
        # A later statement that needs a transaction begins one.
        assert (await driver_connection(conn)).is_in_transaction()


async def test_a_connection_left_in_a_transaction_is_reset_by_the_pool(db: Database) -> None:
    assert db.fast_pool is not None
    async with db.fast_pool.acquire() as driver:
        await driver.execute("BEGIN")
        await driver.execute(BUMP, 7)
    before = await _counter(db)
    for _ in range(2):  # both connections of the pool
        async with db.fast_pool.acquire() as driver:
            assert not driver.is_in_transaction()
    assert await _counter(db) == before  # the abandoned transaction never committed


async def test_a_cancelled_operation_writes_nothing(db: Database) -> None:
    before = await _counter(db)
    started = asyncio.Event()

    async def slow() -> None:
        async with db.operation() as conn:
            driver = await driver_connection(conn)
            await driver.execute(BUMP, 11)
            started.set()
            await driver.execute("SELECT pg_sleep(5)")

    task = asyncio.create_task(slow())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await _counter(db) == before


async def test_listeners_hear_of_committed_events_only(db: Database) -> None:
    heard: list[str] = []
    db.on_events.append(lambda: heard.append("events"))
    body = fake_unit(random.Random(3))
    async with db.operation() as conn:
        created = await service.create(conn, body, WHO, {})
    assert heard == ["events"]
    with pytest.raises(RuntimeError):
        async with db.operation() as conn:
            await service.delete(conn, created.id, None, WHO)  # locks: in a transaction
            raise RuntimeError("after the write")
    assert heard == ["events"]
    async with db.operation() as conn:
        patched = await service.patch(conn, created.id, {"price": 2}, None, WHO, {})
    assert heard == ["events", "events"] and patched.version == 2


async def test_an_unreachable_fast_pool_is_a_503(pg_api: Api) -> None:
    unit = await pg_api.create_unit()
    assert pg_api.context.db.fast_pool is not None
    await pg_api.context.db.fast_pool.close()
    path = f"/api/v2/units/{unit['id']}"
    response = await pg_api.request("GET", path)
    assert_problem(response, 503)
    assert response.headers["retry-after"] == "1"
    assert_problem(await pg_api.request("PATCH", path, json={"price": 3}), 503)


async def test_without_the_fast_pool_writes_use_sqlalchemy(
    postgres_url: str, files_dir: str
) -> None:
    settings = Settings(
        database_url=postgres_url, access_log=False, db_fast_pool_size=0, files_dir=files_dir
    )
    async for api in start_api(settings):
        assert api.context.db.fast_pool is None
        unit = await api.create_unit(price=10)
        path = f"/api/v2/units/{unit['id']}"
        patched = await api.request("PATCH", path, json={"price": 11})
        assert patched.status_code == 200 and patched.json()["price"] == 11
        assert (await api.request("GET", path)).json()["version"] == 2
        assert (await api.request("DELETE", path)).status_code == 204
        assert (await api.request("GET", path)).status_code == 404


async def test_both_pools_run_without_jit_and_parallel_workers(db: Database) -> None:
    # JIT compiles a costly statement at its start, even a plain EXPLAIN (db.server_settings)
    async with db.read() as conn:
        settings = (await conn.exec_driver_sql("SHOW jit")).scalar_one()
        workers = (await conn.exec_driver_sql("SHOW max_parallel_workers_per_gather")).scalar()
    assert (settings, workers) == ("off", "0")
    assert db.fast_pool is not None
    async with db.fast_pool.acquire() as driver:
        assert await driver.fetchval("SHOW jit") == "off"
