"""Single writes gathered (units/gathering.py), on both databases: writes that arrive together
are written together, and each keeps its own outcome, as if it had been alone."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from tests.conftest import Api, unit_body
from units_api.events.tables import events
from units_api.inline_reads import UNREAD, InlineReads
from units_api.units import changes, repository
from units_api.units.gathering import Gatherer
from units_api.units.record import UnitRecord, diff
from units_api.units.tables import unit_history, units
from units_api.units.validation import validate_unit

ACTOR = {"type": "apiKey", "id": "gathering"}


def insert_rows(unit_id: uuid.UUID | None = None, **fields: Any) -> changes.Rows:
    record = UnitRecord.new(validate_unit(unit_body(**fields)), unit_id)
    return changes.prepare("insert", [changes.created(record)], ACTOR)


async def counts(api: Api, unit_ids: list[uuid.UUID]) -> tuple[int, int, int]:
    async with api.context.db.read() as conn:
        found = []
        for table, column in ((units, units.c.id), (unit_history, unit_history.c.unit_id)):
            query = select(func.count()).select_from(table).where(column.in_(unit_ids))
            found.append((await conn.execute(query)).scalar_one())
        query = select(func.count()).select_from(events).where(events.c.unit_id.in_(unit_ids))
        found.append((await conn.execute(query)).scalar_one())
    return found[0], found[1], found[2]


async def test_creates_arriving_together_are_each_written_once(both_api: Api) -> None:
    gatherer = Gatherer(both_api.context.db, lanes=1)
    batches = [insert_rows(name=f"Gathered {n}") for n in range(40)]
    await asyncio.gather(*(gatherer.write(rows) for rows in batches))
    ids = [rows.units[0]["id"] for rows in batches]
    assert await counts(both_api, ids) == (40, 40, 40)
    for unit_id, rows in zip(ids, batches, strict=True):
        got = await both_api.request("GET", f"/api/v2/units/{unit_id}")
        assert got.status_code == 200
        assert got.json()["name"] == rows.units[0]["name"]


async def test_a_write_the_database_refuses_fails_alone(both_api: Api) -> None:
    """A batch whose statement fails wrote nothing; each write is made again alone: the good
    ones land once, the refused one gets its own error."""
    existing = await both_api.create_unit()
    gatherer = Gatherer(both_api.context.db, lanes=1)
    first = insert_rows(name="First")  # written alone while the others gather
    good = [insert_rows(name=f"Good {n}") for n in range(6)]
    clash = insert_rows(uuid.UUID(existing["id"]), name="Clash")
    outcomes = await asyncio.gather(
        gatherer.write(first),
        *(gatherer.write(rows) for rows in good[:3]),
        gatherer.write(clash),
        *(gatherer.write(rows) for rows in good[3:]),
        return_exceptions=True,
    )
    assert isinstance(outcomes[4], (asyncpg.UniqueViolationError, IntegrityError))
    assert [outcome for n, outcome in enumerate(outcomes) if n != 4] == [None] * 7
    ids = [rows.units[0]["id"] for rows in [first, *good]]
    assert await counts(both_api, ids) == (7, 7, 7)
    kept = await both_api.request("GET", f"/api/v2/units/{existing['id']}")
    assert kept.json() == existing


async def test_updates_of_one_unit_gathered_together_all_land(both_api: Api) -> None:
    """Concurrent PATCHes of one unit meet in a batch, where all but one find it moved: the
    batch is rolled back, each is made again, and a moved one reads the unit again."""
    created = await both_api.create_unit(price=1000)
    path = f"/api/v2/units/{created['id']}"
    fields = ["name", "unitDesc", "location", "priceBase", "unitShortDesc", "city"]
    answers = await asyncio.gather(
        *(
            both_api.request(
                "PATCH",
                path,
                content=f'{{"{field}": "v-{field}"}}',
                headers={"content-type": "application/merge-patch+json"},
            )
            for field in fields
        )
    )
    assert [answer.status_code for answer in answers] == [200] * len(fields)
    assert sorted(answer.json()["version"] for answer in answers) == list(range(2, 2 + len(fields)))
    final = (await both_api.request("GET", path)).json()
    assert final["version"] == 1 + len(fields)
    assert all(final[field] == f"v-{field}" for field in fields)
    history = (await both_api.request("GET", f"{path}/history")).json()["data"]
    assert [entry["version"] for entry in history] == list(range(1 + len(fields), 0, -1))


async def test_a_stale_if_match_in_a_batch_fails_alone(both_api: Api) -> None:
    first = await both_api.create_unit()
    second = await both_api.create_unit()
    patch = {"content-type": "application/merge-patch+json"}
    answers = await asyncio.gather(
        *(
            both_api.request(
                "PATCH",
                f"/api/v2/units/{unit['id']}",
                content=f'{{"price": {1000 + n}}}',
                headers={**patch, "If-Match": '"7"' if n == 3 else f'"{unit["version"]}"'},
            )
            for n, unit in enumerate([first, second, first, second, first, second])
        )
    )
    statuses = [answer.status_code for answer in answers]
    assert statuses[3] == 412
    # The rest asked for version 1: of each unit's, the first to be written wins; the others
    # then find the unit moved on, as they would have alone.
    assert statuses.count(200) == 2 and statuses.count(412) == 4


async def test_a_create_whose_client_left_while_it_waited_is_not_written(both_api: Api) -> None:
    gatherer = Gatherer(both_api.context.db, lanes=1)
    first, left, last = insert_rows(), insert_rows(), insert_rows()
    writes = [asyncio.ensure_future(gatherer.write(rows)) for rows in (first, left, last)]
    await asyncio.sleep(0)  # all three wait for the writer, which has not begun
    writes[1].cancel()
    await asyncio.gather(writes[0], writes[2])
    with pytest.raises(asyncio.CancelledError):
        await writes[1]
    ids = [rows.units[0]["id"] for rows in (first, left, last)]
    assert await counts(both_api, ids[:1] + ids[2:]) == (2, 2, 2)
    assert await counts(both_api, ids[1:2]) == (0, 0, 0)


async def test_a_write_just_after_the_writers_finished_is_written(both_api: Api) -> None:
    """A write that comes as the last lane's writer has found nothing more to write (its task
    not yet done) starts a writer of its own rather than waiting for one that will not come."""
    gatherer = Gatherer(both_api.context.db, lanes=1)
    first, second = insert_rows(), insert_rows()
    await gatherer.write(first)
    async with asyncio.timeout(10):  # in this task: the writer's task is not yet done here
        await gatherer.write(second)
    ids = [rows.units[0]["id"] for rows in (first, second)]
    assert await counts(both_api, ids) == (2, 2, 2)


async def test_a_unit_read_on_the_loops_thread_is_the_unit_read_on_a_connection(
    api: Api, tmp_path: Path
) -> None:
    """SQLite: a gathered update's read (`inline_reads.py`) gives what a pooled connection's
    read gives; one that cannot be made there is made on a pooled connection instead."""
    db = api.context.db
    if db.dialect != "sqlite":
        assert db.inline_reads is None
        return
    assert db.inline_reads is not None
    created = await api.create_unit(price=1234)
    unit_id = uuid.UUID(created["id"])
    async with db.read() as conn:
        pooled = await repository.fetch_current(conn, unit_id, lock=False)
    assert pooled is not None
    inline = await repository.fetch_current_unlocked(db, unit_id)
    assert inline == dict(pooled)
    assert inline["created_at"].tzinfo is not None
    assert await repository.fetch_current_unlocked(db, uuid.uuid4()) is None

    not_a_database = tmp_path / "not-a-database"
    not_a_database.write_bytes(b"x" * 4096)
    unreadable = InlineReads(str(not_a_database))
    assert unreadable.first("SELECT count(*) FROM units", ()) is UNREAD
    kept, db.inline_reads = db.inline_reads, unreadable
    try:
        assert await repository.fetch_current_unlocked(db, unit_id) == inline
        patched = await api.request(
            "PATCH",
            f"/api/v2/units/{unit_id}",
            content='{"price": 4321}',
            headers={"content-type": "application/merge-patch+json"},
        )
        assert patched.status_code == 200 and patched.json()["price"] == 4321
    finally:
        db.inline_reads = kept


async def update_rows(api: Api, unit_id: uuid.UUID, price: int) -> changes.Rows:
    """A PATCH of the unit's price as a request makes it: read, then changed."""
    row = await repository.fetch_current_unlocked(api.context.db, unit_id)
    assert row is not None
    record = UnitRecord.from_row(unit_id, row)
    before = record.fields
    record.fields = {**before, "price": price}
    change = changes.updated(record, "patch", diff(before, record.fields))
    return changes.prepare("update", [change], ACTOR)


async def stale_update(api: Api, unit_id: uuid.UUID, price: int, moved_to: int) -> changes.Rows:
    """`update_rows`, made before the unit moved on: a PATCH to `moved_to` written after."""
    stale = await update_rows(api, unit_id, price)
    moved_on = await api.request(
        "PATCH",
        f"/api/v2/units/{unit_id}",
        content=f'{{"price": {moved_to}}}',
        headers={"content-type": "application/merge-patch+json"},
    )
    assert moved_on.status_code == 200
    return stale


async def test_updates_that_would_move_nothing_fail_alone_in_a_batch(both_api: Api) -> None:
    """In one batch: an update read before its unit moved on, and two of one unit read at the
    same version. Each of those finds its unit moved (its request reads it again); the first
    of the two and the others are written."""
    units_made = [await both_api.create_unit(price=100) for _ in range(4)]
    first, stale, twice, good = (uuid.UUID(unit["id"]) for unit in units_made)
    stale_rows = await stale_update(both_api, stale, 200, moved_to=150)
    gatherer = Gatherer(both_api.context.db, lanes=1)
    writes = [
        await update_rows(both_api, first, 201),  # written alone while the others gather
        stale_rows,
        await update_rows(both_api, twice, 202),
        await update_rows(both_api, twice, 203),
        await update_rows(both_api, good, 204),
    ]
    outcomes = await asyncio.gather(
        *(gatherer.write(rows) for rows in writes), return_exceptions=True
    )
    assert [type(outcome).__name__ for outcome in outcomes] == [
        "NoneType",
        "Moved",
        "NoneType",
        "Moved",
        "NoneType",
    ]
    prices = {}
    for unit_id in (first, stale, twice, good):
        got = (await both_api.request("GET", f"/api/v2/units/{unit_id}")).json()
        prices[unit_id] = (got["price"], got["version"])
    assert prices == {first: (201, 2), stale: (150, 2), twice: (202, 2), good: (204, 2)}
    history = (await both_api.request("GET", f"/api/v2/units/{twice}/history")).json()["data"]
    assert [entry["version"] for entry in history] == [2, 1]


async def test_of_two_updates_of_a_unit_the_current_one_lands_after_a_stale_one(
    both_api: Api,
) -> None:
    """A stale update of a unit, then one read at its current version, in one batch: the stale
    one finds it moved; the current one is written, as it would have been alone."""
    made = [await both_api.create_unit(price=100) for _ in range(2)]
    first, unit = (uuid.UUID(one["id"]) for one in made)
    stale = await stale_update(both_api, unit, 300, moved_to=200)
    current = await update_rows(both_api, unit, 400)
    gatherer = Gatherer(both_api.context.db, lanes=1)
    writes = [await update_rows(both_api, first, 101), stale, current]
    outcomes = await asyncio.gather(
        *(gatherer.write(rows) for rows in writes), return_exceptions=True
    )
    assert [type(outcome).__name__ for outcome in outcomes] == ["NoneType", "Moved", "NoneType"]
    got = (await both_api.request("GET", f"/api/v2/units/{unit}")).json()
    assert (got["price"], got["version"]) == (400, 3)
