"""Feed positions: given once, in a table of their own, without writing an event row again;
and the cursor under writers that commit out of order, roll back, or hold their transaction
open across the sequencer's steps."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import orjson
import pytest
from sqlalchemy import func, select
from sqlalchemy.engine import make_url

from tests.conftest import admin_sql, fresh_postgres, start_api
from units_api.config import Settings
from units_api.db import Database, create_engine
from units_api.events import repository
from units_api.events.recorder import record_event
from units_api.events.sequencer import sequence
from units_api.events.tables import events
from units_api.migrate import upgrade

ACTOR = {"type": "system", "name": "test"}
FEED = "/api/v2/events"


@pytest.fixture
def postgres() -> Iterator[str]:
    """A PostgreSQL database of its own: its tables' counters start at zero."""
    with fresh_postgres("units_positions") as url:
        upgrade(url)
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def own_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/positions.db"
        upgrade(url)
        yield url
        return
    with fresh_postgres("units_positions") as url:
        upgrade(url)
        yield url


async def table_rows(url: str, table: str) -> dict[str, int]:
    """A table's counts of rows inserted, updated, deleted and dead (pg_stat_user_tables)."""
    conn = await asyncpg.connect(url)
    try:
        if conn.get_server_version().major >= 15:
            await conn.execute("SELECT pg_stat_force_next_flush()")
        await conn.execute("SELECT pg_stat_clear_snapshot()")
        row = await conn.fetchrow(
            "SELECT n_tup_ins, n_tup_upd, n_tup_del, n_dead_tup FROM pg_stat_user_tables"
            " WHERE relname = $1",
            table,
        )
        return {"inserted": row[0], "updated": row[1], "deleted": row[2], "dead": row[3]}
    finally:
        await conn.close()


async def counted(url: str, table: str, inserted: int) -> dict[str, int]:
    """The table's counts once they include `inserted` rows: a backend adds its counts to the
    shared ones at the latest when it exits, and the test's connections are closed by then."""
    for _ in range(600):
        found = await table_rows(url, table)
        if found["inserted"] >= inserted:
            return found
        await asyncio.sleep(0.05)
    return await table_rows(url, table)


async def test_numbering_updates_no_event_row(postgres: str) -> None:
    settings = Settings(database_url=postgres, access_log=False, run_jobs=False)
    async for api in start_api(settings):
        units = [await api.create_unit() for _ in range(20)]
        for unit in units[:5]:
            response = await api.request(
                "PATCH", f"/api/v2/units/{unit['id']}", json={"price": 2600000.50}
            )
            assert response.status_code == 200, response.text
        response = await api.request("GET", FEED, params={"limit": 1000})
        assert response.status_code == 200, response.text
        assert len(response.json()["data"]) == 25
        async with api.context.db.read() as conn:
            written = len((await conn.execute(select(events.c.seq))).all())
    assert written == 25
    found = await counted(postgres, "events", written)
    assert found == {"inserted": written, "updated": 0, "deleted": 0, "dead": 0}
    positions = await counted(postgres, "event_positions", written)
    assert positions["inserted"] == written and positions["updated"] == 0


async def record(db: Database, n: int = 1) -> list[uuid.UUID]:
    """`n` job events in one transaction, committed; their ids."""
    async with db.transaction() as conn:
        return [await record_one(conn) for _ in range(n)]


async def record_one(conn: Any) -> uuid.UUID:
    marker = uuid.uuid4()
    data = orjson.dumps({"id": str(marker), "kind": "export"})
    await record_event(conn, "export.succeeded", data, ACTOR)
    return marker


def marker_of(row: Any) -> uuid.UUID:
    return uuid.UUID(orjson.loads(row.data)["id"])


async def read_after(db: Database, after: int) -> tuple[list[tuple[int, uuid.UUID]], int]:
    """What the feed holds after `after` (what committed before this is numbered first), by
    position; and its end."""
    await sequence(db)
    found: list[tuple[int, uuid.UUID]] = []
    async with db.read() as conn:
        head = (await repository.positions(conn))["head"]
        while True:
            rows = await repository.page(conn, after, head, 100)
            found += [(row.pos, marker_of(row)) for row in rows]
            if len(rows) < 100:
                return found, head
            after = rows[-1].pos


async def settled(url: str) -> int:
    conn = await asyncpg.connect(url)
    try:
        return int(await conn.fetchval("SELECT pos FROM feed_positions WHERE name = 'settled'"))
    finally:
        await conn.close()


async def last_seq(conn: Any) -> int:
    """The highest `seq` the transaction sees (its own events included)."""
    return int((await conn.execute(select(func.max(events.c.seq)))).scalar_one())


async def test_an_event_that_commits_late_is_numbered_after_the_head_and_read_once(
    postgres: str,
) -> None:
    db = Database(create_engine(postgres, 4))
    try:
        inserted, release = asyncio.Event(), asyncio.Event()
        late: list[uuid.UUID] = []
        open_seq = 0

        async def slow() -> None:
            nonlocal open_seq
            async with db.transaction() as conn:
                late.append(await record_one(conn))
                open_seq = await last_seq(conn)
                inserted.set()
                await release.wait()

        writer = asyncio.create_task(slow())
        await inserted.wait()
        # Drawn after the open transaction's event, committed before it.
        first = await record(db, 2)
        seen, cursor = await read_after(db, 0)
        assert [marker for _, marker in seen] == first
        # Its `seq` is below every event numbered so far: the watermark stays below it.
        for _ in range(3):
            await record(db)
            seen_more, cursor = await read_after(db, cursor)
            seen += seen_more
            assert await settled(postgres) < open_seq
        release.set()
        await writer
        last, cursor = await read_after(db, cursor)
        assert [marker for _, marker in last] == late
        everything, _ = await read_after(db, 0)
        assert everything == seen + last
        assert len({marker for _, marker in everything}) == len(everything) == 6
    finally:
        await db.dispose()


async def test_a_rolled_back_event_does_not_hold_the_watermark(postgres: str) -> None:
    db = Database(create_engine(postgres, 4))
    try:
        with pytest.raises(RuntimeError):
            async with db.transaction() as conn:
                gone = await record_one(conn)
                gone_seq = await last_seq(conn)
                raise RuntimeError("rolled back")
        kept = await record(db)
        seen, _ = await read_after(db, 0)
        assert [marker for _, marker in seen] == kept and gone not in kept
        # No writer is left: a step that numbers anything raises the watermark past the gap.
        await record(db)
        await read_after(db, 0)
        assert await settled(postgres) > gone_seq
    finally:
        await db.dispose()


async def test_many_events_at_once_are_numbered_by_plans_made_for_them(postgres: str) -> None:
    """Events written by the thousand into tables the planner last saw empty (never analysed:
    autovacuum off here, or not come yet): the sequencer's statements are planned for the
    tables as they are, not kept with the plan they got when the tables were empty, which
    scanned every position for each event (a minute for these 30,000, then 37 s for each step
    that numbered nothing). Any statement past 5 s is cancelled here."""
    name = make_url(postgres).database
    await admin_sql(postgres, f"ALTER DATABASE \"{name}\" SET statement_timeout = '5s'")
    db = Database(create_engine(postgres, 1))  # one connection: its statements meet again
    try:
        await sequence(db)  # on the empty tables
        async with db.transaction() as conn:
            await conn.exec_driver_sql(
                "INSERT INTO events (id, type, occurred_at, actor, data) SELECT "
                "gen_random_uuid(), 'export.succeeded', now(), '{}', '{}' "
                "FROM generate_series(1, 30000)"
            )
        assert await sequence(db) == 30_000
        for _ in range(50):
            assert await sequence(db) == 0
        async with db.read() as conn:
            assert (await repository.positions(conn))["head"] == 30_000
            kept = await conn.exec_driver_sql("SELECT count(*) FROM pg_prepared_statements")
            # The statements planned once each are let go, not piled up on the connection.
            assert kept.scalar_one() < 40
    finally:
        await db.dispose()


async def test_followers_never_miss_or_repeat_events_under_concurrent_writers(
    own_database: str,
) -> None:
    """Writers hold their transactions open for random times (so they commit in another
    order than their events were numbered at insert), some roll back; followers read the feed
    by cursor meanwhile. Each follower reads every committed event once, in the feed's order."""
    postgresql = own_database.startswith("postgresql")
    db = Database(create_engine(own_database, 12 if postgresql else 4))
    rng = random.Random(34)
    committed: list[uuid.UUID] = []
    writing = True

    async def writer(plans: list[tuple[int, float, bool]]) -> None:
        for count, hold, fails in plans:
            try:
                async with db.transaction() as conn:
                    mine = [await record_one(conn) for _ in range(count)]
                    await asyncio.sleep(hold)
                    if fails:
                        raise LookupError
            except LookupError:
                continue
            committed.extend(mine)

    async def follower() -> list[tuple[int, uuid.UUID]]:
        seen: list[tuple[int, uuid.UUID]] = []
        cursor = 0
        while True:
            done = not writing
            found, _ = await read_after(db, cursor)
            seen += found
            if found:
                cursor = found[-1][0]
            if done:
                return seen
            await asyncio.sleep(rng.random() * 0.01)

    writers, per_writer = (8, 25) if postgresql else (3, 15)
    plans = [
        [(rng.randint(1, 3), rng.random() * 0.03, rng.random() < 0.1) for _ in range(per_writer)]
        for _ in range(writers)
    ]
    try:
        followers = [asyncio.create_task(follower()) for _ in range(3)]
        await asyncio.gather(*(writer(plan) for plan in plans))
        writing = False
        seen_by = await asyncio.gather(*followers)
        everything, _ = await read_after(db, 0)
        assert sorted(marker for _, marker in everything) == sorted(committed)
        for seen in seen_by:
            assert seen == everything
    finally:
        await db.dispose()
