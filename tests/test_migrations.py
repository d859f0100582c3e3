"""Migrations on both databases: up, data carried forward (the search backfill, the feed's
positions), down, up."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
from alembic import command
from sqlalchemy import func, select
from sqlalchemy.engine import make_url

from tests.conftest import fresh_postgres
from units_api.channels.repository import kinds as channel_kinds
from units_api.clock import utcnow
from units_api.db import Database, create_engine
from units_api.events import repository
from units_api.events.recorder import record_event
from units_api.events.sequencer import sequence
from units_api.events.tables import events, feed_positions
from units_api.filters.parser import parse_filter
from units_api.http.json import dumps_plain, load_stored
from units_api.ids import uuid7
from units_api.migrate import alembic_config, head_revision
from units_api.search.index import search_condition
from units_api.search.words import SIGNATURE_COLUMNS, signature
from units_api.units.filtering import unit_condition
from units_api.units.record import UnitRecord, new_availability, new_publishing
from units_api.units.tables import LISTING_COLUMNS, PRESENT_COLUMNS, units
from units_api.units.validation import validate_unit

LISTING_FIELDS = tuple(LISTING_COLUMNS)
# The columns 0026 added.
AFTER_0025 = ("channels", *PRESENT_COLUMNS.values())


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/migrations.db"
        return
    with fresh_postgres("units_mig") as url:
        yield url


async def insert_old_unit(url: str) -> None:
    db = Database(create_engine(url, 1))
    fields = validate_unit(
        {
            "name": "Old Villa",
            "type": "villa",
            "unitNameAr": "فيلا قديمة",
            "unitLocation": {"type": "Point", "coordinates": [31.2357, 30.0444]},
        }
    )
    now = utcnow()
    record = UnitRecord(uuid7(), 1, now, now, fields, new_publishing(), new_availability(now))
    # As 0001 stored it: without 0010's point or 0021's listing fields, in its record or columns.
    newer = ("lng", "lat", *LISTING_COLUMNS.values(), *AFTER_0025)
    columns = {k: v for k, v in record.columns().items() if k not in newer}
    columns["doc"] = dumps_plain(
        {k: v for k, v in record.document().items() if k not in LISTING_FIELDS}
    ).decode()
    async with db.transaction() as conn:
        await conn.execute(units.insert(), {"id": record.id, "created_at": now, **columns})
    await db.dispose()


async def count_filtered(url: str, text: str) -> int:
    db = Database(create_engine(url, 1))
    async with db.read() as conn:
        condition = unit_condition(parse_filter(text), db.dialect)
        query = select(func.count()).select_from(units).where(condition)
        found = int((await conn.execute(query)).scalar_one())
    await db.dispose()
    return found


async def count_found(url: str, q: str) -> int:
    db = Database(create_engine(url, 1))
    async with db.read() as conn:
        query = (
            select(func.count())
            .select_from(units)
            .where(search_condition(q, db.dialect, units.c.id))
        )
        found = int((await conn.execute(query)).scalar_one())
    await db.dispose()
    return found


def test_upgrade_backfills_search_then_downgrade_and_upgrade_again(empty_database: str) -> None:
    config = alembic_config(empty_database)
    command.upgrade(config, "0001")
    asyncio.run(insert_old_unit(empty_database))
    command.upgrade(config, "head")
    assert asyncio.run(count_found(empty_database, "قديمه")) == 1
    assert asyncio.run(count_found(empty_database, "old vil")) == 1
    # Stemmed by 0011: an English plural, an Arabic word with its article and conjunction.
    assert asyncio.run(count_found(empty_database, "villas")) == 1
    assert asyncio.run(count_found(empty_database, "والقديمة")) == 1
    # Its point, filled in by 0010 from the stored document.
    near, beside = "unitLocation=near=(31.2357,30.0444,1)", "unitLocation=within=(31,30,31.2,31)"
    assert asyncio.run(count_filtered(empty_database, near)) == 1
    assert asyncio.run(count_filtered(empty_database, beside)) == 0
    if empty_database.startswith("postgresql"):
        # Its signature, given by 0019 from its words.
        (lexemes, *parts) = asyncio.run(
            _admin(
                empty_database,
                "SELECT tsvector_to_array(vector) FROM unit_search",
                *(f"SELECT {name} FROM unit_search" for name in SIGNATURE_COLUMNS),
            )
        )
        assert tuple(part for (part,) in parts) == signature(lexemes[0])
        assert asyncio.run(count_found(empty_database, "vil")) == 1
    # Its listing fields, null in its columns and its record, in the record's order (0021).
    (doc, *values) = asyncio.run(_stored(empty_database))
    assert values == [None] * len(LISTING_FIELDS)
    record = load_stored(doc)
    assert {name: record[name] for name in LISTING_FIELDS} == dict.fromkeys(LISTING_FIELDS)
    assert list(record) == list(UnitRecord.from_row(uuid7(), _row(doc)).document())
    for name in LISTING_FIELDS:
        assert asyncio.run(count_filtered(empty_database, f"{name}=null=true")) == 1
    command.downgrade(config, "base")
    command.upgrade(config, "head")
    assert asyncio.run(count_found(empty_database, "villa")) == 0
    assert head_revision() == "0027"


def _row(doc: str) -> dict[str, object]:
    now = utcnow()
    return {"doc": doc, "version": 1, "created_at": now, "updated_at": now}


async def _stored(url: str) -> list[object]:
    db = Database(create_engine(url, 1))
    async with db.read() as conn:
        columns = [units.c[column] for column in LISTING_COLUMNS.values()]
        row = (await conn.execute(select(units.c.doc, *columns))).one()
    await db.dispose()
    return list(row)


async def _admin(url: str, *statements: str) -> list[list[object]]:
    conn = await asyncpg.connect(url)
    try:
        return [[row[0] for row in await conn.fetch(statement)] for statement in statements]
    finally:
        await conn.close()


def test_without_leave_to_create_btree_gist_there_is_no_index_by_time() -> None:
    """A role that may not create extensions migrates to the head all the same, without the
    index of points by time; a superuser's migration builds it."""
    with fresh_postgres("units_mig") as url:
        role = f"units_plain_{uuid.uuid4().hex[:8]}"
        asyncio.run(
            _admin(
                url,
                f'CREATE ROLE "{role}" LOGIN',
                f'GRANT CREATE, USAGE ON SCHEMA public TO "{role}"',
                f"REVOKE CREATE ON DATABASE {make_url(url).database} FROM PUBLIC",
            )
        )
        try:
            command.upgrade(
                alembic_config(
                    make_url(url).set(username=role).render_as_string(hide_password=False)
                ),
                "head",
            )
            found = asyncio.run(
                _admin(
                    url,
                    "SELECT version_num FROM alembic_version",
                    "SELECT extname FROM pg_extension WHERE extname = 'btree_gist'",
                    "SELECT indexname FROM pg_indexes WHERE indexname LIKE 'ix_units_location%'",
                )
            )
            assert found == [[head_revision()], [], ["ix_units_location"]]
        finally:
            asyncio.run(_admin(url, f'DROP OWNED BY "{role}" CASCADE', f'DROP ROLE "{role}"'))


async def insert_published_units(
    url: str, channel_lists: list[list[str]], fields: dict[str, object] | None = None
) -> None:
    """Units as 0021 to 0025 stored them, each published to the channels given (any names),
    with `fields` beside a name and a type."""
    db = Database(create_engine(url, 1))
    now = utcnow()
    async with db.transaction() as conn:
        for names in channel_lists:
            valid = validate_unit({"name": "Listed Villa", "type": "villa", **(fields or {})})
            publishing = {**new_publishing(), "status": "published", "channels": names}
            record = UnitRecord(uuid7(), 1, now, now, valid, publishing, new_availability(now))
            columns = {k: v for k, v in record.columns().items() if k not in AFTER_0025}
            await conn.execute(units.insert(), {"id": record.id, "created_at": now, **columns})
    await db.dispose()


async def stored_channels(url: str) -> dict[str, str]:
    db = Database(create_engine(url, 1))
    async with db.read() as conn:
        found = await channel_kinds(conn)
    await db.dispose()
    return found


def test_every_channel_name_already_used_becomes_a_label(empty_database: str) -> None:
    config = alembic_config(empty_database)
    command.upgrade(config, "0021")
    used = [["Website ", "app"], ["website", "app", "partner portal"], [], ["موقع"]]
    asyncio.run(insert_published_units(empty_database, used))
    command.upgrade(config, "head")
    assert asyncio.run(stored_channels(empty_database)) == {
        "website": "website",
        "Website ": "label",
        "app": "label",
        "partner portal": "label",
        "موقع": "label",
    }
    command.downgrade(config, "0021")
    command.upgrade(config, "head")
    assert asyncio.run(stored_channels(empty_database))["app"] == "label"


def test_channels_and_set_fields_are_filled_in_from_the_records(empty_database: str) -> None:
    """0026 fills the columns a channel's rules read from each stored record: the filters that
    read them find what they found in the records before."""
    config = alembic_config(empty_database)
    command.upgrade(config, "0025")
    pictured = {"unitImageUrl": "https://cdn.example.com/a.jpg", "unitDesc": "Sea view"}
    asyncio.run(insert_published_units(empty_database, [["website", "app"], ["app"]], pictured))
    galleried = {"gallery": ["https://cdn.example.com/b.jpg"], "unitShortDesc": "Garden"}
    asyncio.run(insert_published_units(empty_database, [["website"]], galleried))
    asyncio.run(insert_published_units(empty_database, [[]]))
    filters = {
        "channel==website": 2,
        "channel=in=(app,partner)": 2,
        "channel!=app": 2,
        "unitImageUrl=null=false": 2,
        "unitImageUrl=null=true": 2,
        "gallery=null=false": 1,
        "unitDesc=null=false": 2,
        "unitShortDesc=null=false": 1,
        "(unitImageUrl=null=false,gallery=null=false);channel==website": 2,
    }
    command.upgrade(config, "head")
    assert {text: asyncio.run(count_filtered(empty_database, text)) for text in filters} == filters
    assert sorted(asyncio.run(_channel_columns(empty_database))) == sorted(
        [
            ("[]", False, False, False, False),
            ('["app"]', True, False, True, False),
            ('["website","app"]', True, False, True, False),
            ('["website"]', False, True, False, True),
        ]
    )


async def _channel_columns(url: str) -> list[tuple[object, ...]]:
    """Each unit's 0026 columns, the channels as compact JSON."""
    db = Database(create_engine(url, 1))
    async with db.read() as conn:
        rows = (await conn.execute(select(*(units.c[name] for name in AFTER_0025)))).all()
    await db.dispose()
    return [(dumps_plain(load_stored(row[0])).decode(), *map(bool, row[1:])) for row in rows]


async def insert_events_0026(url: str, numbered: int, waiting: int) -> list[uuid.UUID]:
    """Events as 0026 kept them: the first `numbered` with their positions (the head at the
    last), then `waiting` committed but not numbered yet (PostgreSQL's sequencer numbers after
    commit); their ids in insert order."""
    conn = await asyncpg.connect(url)
    ids = [uuid7() for _ in range(numbered + waiting)]
    try:
        for i, event_id in enumerate(ids):
            await conn.execute(
                "INSERT INTO events (id, type, occurred_at, actor, data, pos) "
                "VALUES ($1, 'export.succeeded', now(), '{}', '{}', $2)",
                event_id,
                i + 1 if i < numbered else None,
            )
        await conn.execute("UPDATE feed_positions SET pos = $1 WHERE name = 'head'", numbered)
    finally:
        await conn.close()
    return ids


async def sqlite_events_0026(url: str, count: int) -> list[uuid.UUID]:
    """SQLite's events as 0026 kept them: numbered as they were written."""
    db = Database(create_engine(url, 1))
    ids = [uuid7() for _ in range(count)]
    async with db.transaction() as conn:
        for i, event_id in enumerate(ids):
            await conn.execute(
                events.insert(),
                {
                    "id": event_id,
                    "type": "export.succeeded",
                    "occurred_at": utcnow(),
                    "actor": "{}",
                    "data": "{}",
                    "pos": i + 1,
                },
            )
        await conn.execute(
            feed_positions.update().where(feed_positions.c.name == "head").values(pos=count)
        )
    await db.dispose()
    return ids


async def read_whole_feed(url: str, new: int) -> list[tuple[int, uuid.UUID]]:
    """`new` events written by the release, then every event in the feed, numbered first."""
    db = Database(create_engine(url, 2))
    try:
        for _ in range(new):
            async with db.transaction() as conn:
                await record_event(conn, "export.succeeded", b"{}", {})
        await sequence(db)
        async with db.read() as conn:
            head = (await repository.positions(conn))["head"]
            rows = await repository.page(conn, 0, head, 1000)
        return [(row.pos, row.id) for row in rows]
    finally:
        await db.dispose()


async def old_positions(url: str) -> list[tuple[int | None, uuid.UUID]]:
    db = Database(create_engine(url, 1))
    async with db.read() as conn:
        rows = (await conn.execute(select(events.c.pos, events.c.id).order_by(events.c.seq))).all()
    await db.dispose()
    return [(row.pos, row.id) for row in rows]


def test_positions_move_to_their_own_table_and_back(empty_database: str) -> None:
    """0027 copies the positions given; events not yet numbered are numbered after the head
    by the release's sequencer, and the feed reads each event once in feed order. Down, the
    positions go back into `events.pos`."""
    postgresql = empty_database.startswith("postgresql")
    config = alembic_config(empty_database)
    command.upgrade(config, "0026")
    if postgresql:
        ids = asyncio.run(insert_events_0026(empty_database, 5, 3))
    else:
        ids = asyncio.run(sqlite_events_0026(empty_database, 5))
    command.upgrade(config, "head")
    feed = asyncio.run(read_whole_feed(empty_database, 2))
    assert [pos for pos, _ in feed] == list(range(1, len(ids) + 3))
    assert [event_id for _, event_id in feed][: len(ids)] == ids
    if postgresql:
        (indexes, settled) = asyncio.run(
            _admin(
                empty_database,
                "SELECT indexname FROM pg_indexes WHERE tablename = 'events' ORDER BY 1",
                "SELECT pos FROM feed_positions WHERE name = 'settled'",
            )
        )
        assert indexes == ["ix_events_deleted_unit", "pk_events", "uq_events_id"]
        assert settled[0] >= len(ids) + 2  # raised by the sequencer's steps since
    command.downgrade(config, "0026")
    assert asyncio.run(old_positions(empty_database)) == feed
    command.upgrade(config, "head")
    assert asyncio.run(read_whole_feed(empty_database, 0)) == feed


def test_an_event_committed_while_0027_runs_is_numbered() -> None:
    """A write holding its event uncommitted while 0027 copies the positions (its `seq` below
    events numbered and not numbered yet) commits meanwhile: the release numbers it after
    the head, once."""
    with fresh_postgres("units_mig") as url:
        config = alembic_config(url)
        command.upgrade(config, "0026")
        inserted, held = threading.Event(), []

        async def hold() -> None:
            conn = await asyncpg.connect(url)
            try:
                async with conn.transaction():
                    held.append(uuid7())
                    await conn.execute(
                        "INSERT INTO events (id, type, occurred_at, actor, data) "
                        "VALUES ($1, 'export.succeeded', now(), '{}', '{}')",
                        held[0],
                    )
                    inserted.set()
                    await asyncio.sleep(1)
            finally:
                await conn.close()

        writer = threading.Thread(target=asyncio.run, args=(hold(),))
        writer.start()
        assert inserted.wait(30)
        ids = asyncio.run(insert_events_0026(url, 3, 2))
        command.upgrade(config, "head")
        writer.join()
        feed = asyncio.run(read_whole_feed(url, 1))
        assert [event_id for _, event_id in feed][:3] == ids[:3]
        # In insert order: the held event's `seq` is the lowest.
        assert [event_id for _, event_id in feed[3:6]] == [*held, *ids[3:]]
        assert [pos for pos, _ in feed] == list(range(1, 8))
