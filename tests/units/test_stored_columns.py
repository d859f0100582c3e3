"""A stored unit's columns (what filters, sorts, the map and the channels read) always agree
with its stored record, whatever a write changed: an update of some fields sets only their
columns (`record.columns_of`), so a column it leaves out must be one it could not change."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import AsyncIterator
from datetime import datetime
from decimal import Decimal
from typing import Any

import orjson
import pytest
from sqlalchemy import event, select, text

from tests.conftest import Api, roomy_settings, start_api
from units_api.http.json import dumps
from units_api.sample_data import fake_unit
from units_api.units.record import UnitRecord, columns_of
from units_api.units.schemas import EDITABLE_FIELDS
from units_api.units.tables import FIELD_COLUMNS, PRESENT_COLUMNS, units


@pytest.fixture
async def sqlite_api(sqlite_url: str, files_dir: str) -> AsyncIterator[Api]:
    async for instance in start_api(roomy_settings(sqlite_url, files_dir)):
        yield instance


def _plain(value: Any) -> Any:
    """A column's value in one form, whichever way it was read or made."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float, Decimal)):
        return float(value)
    if isinstance(value, datetime):
        return value.isoformat()
    return value


async def stored_row(api: Api, unit_id: str) -> dict[str, Any]:
    async with api.context.db.read() as conn:
        query = select(units).where(units.c.id == uuid.UUID(unit_id))
        return dict((await conn.execute(query)).mappings().one())


async def assert_columns_agree(api: Api, unit_id: str) -> dict[str, Any]:
    """The unit's stored columns, checked against its stored record."""
    row = await stored_row(api, unit_id)
    expected = UnitRecord.from_row(uuid.UUID(unit_id), row).columns()
    assert orjson.loads(row["doc"]) == orjson.loads(expected.pop("doc"))
    assert {name: _plain(row[name]) for name in expected} == {
        name: _plain(value) for name, value in expected.items()
    }
    return row


async def on_the_map(api: Api, unit_id: str) -> bool:
    """Whether the unit has a point in the map search's table (SQLite's R*Tree)."""
    async with api.context.db.read() as conn:
        found = await conn.execute(
            text("SELECT count(*) FROM unit_locations WHERE unit_id = :id"),
            {"id": uuid.UUID(unit_id).hex},
        )
        return found.scalar_one() == 1


async def _send(api: Api, method: str, url: str, body: dict[str, Any]) -> Any:
    headers = {"content-type": "application/json"}
    return await api.request(method, url, content=dumps(body), headers=headers)


async def _patch(api: Api, unit_id: str, body: dict[str, Any]) -> int:
    response = await _send(api, "PATCH", f"/api/v2/units/{unit_id}", body)
    assert response.status_code in (200, 422), response.text
    return response.status_code


def test_every_column_but_the_keys_is_written_by_some_update() -> None:
    """Each column a unit's record fills is set by an update of its field, or by every
    update; the publishing and availability columns by their own writes (every column)."""
    everything = set(columns_of(frozenset(EDITABLE_FIELDS)))
    states = {
        "publishing_status",
        "published_at",
        "scheduled_at",
        "channels",
        "availability_status",
        "reserved_until",
    }
    made = set(UnitRecord.new(fake_unit(random.Random(1))).columns())
    assert everything | states == made
    assert not everything & states
    assert set(columns_of(frozenset({"price"}))) == {"version", "updated_at", "doc", "price"}
    assert {"lng", "lat"} <= set(columns_of(frozenset({"unitLocation"})))
    for field, column in {**FIELD_COLUMNS, **PRESENT_COLUMNS}.items():
        assert column in columns_of(frozenset({field}))


async def test_each_field_changed_set_and_removed_leaves_the_columns_agreeing(api: Api) -> None:
    """Every field changed, set to null and put back, one at a time: each write leaves every
    column agreeing with the record, and between them every column of a field did change."""
    first, other = fake_unit(random.Random(3)), fake_unit(random.Random(4))
    first |= {"completionStatus": "offPlan", "handoverDate": "2028-06-15"}
    other |= {"completionStatus": "offPlan", "handoverDate": "2029-12-01"}
    other["unitLocation"] = {"type": "Point", "coordinates": [31.5, 30.25]}
    unit = await api.create_unit(**first)
    unit_id, version = unit["id"], unit["version"]
    before = await assert_columns_agree(api, unit_id)
    changed: set[str] = set()
    patches = [
        {field: value}
        for field in EDITABLE_FIELDS
        for value in (other.get(field), None, first.get(field))
    ]
    # A ready unit has no handover date: the two change together.
    patches += [{"completionStatus": "ready", "handoverDate": None}, first]
    for patch in patches:
        if await _patch(api, unit_id, patch) != 200:
            continue
        after = await assert_columns_agree(api, unit_id)
        if after["version"] > version:
            version = after["version"]
            changed |= {name for name in after if _plain(after[name]) != _plain(before[name])}
        before = after
    fields_columns = {*FIELD_COLUMNS.values(), *PRESENT_COLUMNS.values(), "lng", "lat"}
    assert fields_columns <= changed
    # Several fields at once, the state machines between.
    await _patch(api, unit_id, {"price": 4_250_000, "city": "Giza", "unitLocation": None})
    await assert_columns_agree(api, unit_id)
    published = await _send(
        api,
        "PUT",
        f"/api/v2/units/publishing-actions/{unit_id}",
        {"action": "publish", "channels": ["website"]},
    )
    assert published.status_code == 200, published.text
    await assert_columns_agree(api, unit_id)
    assert await _patch(api, unit_id, {"gallery": None, "surface": 141}) == 200
    await assert_columns_agree(api, unit_id)


async def test_an_update_sets_only_the_columns_of_what_it_changes_on_sqlite(
    sqlite_api: Api,
) -> None:
    """SQLite rewrites the index entries of every column an UPDATE sets: a new price sets the
    price's column, not the city's; and a unit whose location did not change keeps its point
    on the map."""
    api = sqlite_api
    unit = await api.create_unit(**fake_unit(random.Random(8)))
    assert await on_the_map(api, unit["id"])
    statements: list[str] = []

    def seen(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.lstrip().upper().startswith("UPDATE UNITS "):
            statements.append(statement)

    engine = api.context.db.engine.sync_engine
    event.listen(engine, "before_cursor_execute", seen)
    try:
        assert await _patch(api, unit["id"], {"price": 3_333_000}) == 200
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    assert len(statements) == 1
    assigned = statements[0].upper().split(" WHERE ")[0]
    assert "PRICE=" in assigned.replace(" ", "") and "CITY" not in assigned
    assert await on_the_map(api, unit["id"])
    await assert_columns_agree(api, unit["id"])


async def test_a_bulk_update_leaves_the_columns_agreeing(api: Api) -> None:
    made = [await api.create_unit(**fake_unit(random.Random(seed))) for seed in (5, 6, 7)]
    body = {
        "atomic": True,
        "units": [
            {"id": made[0]["id"], "price": 1_990_000},
            {"id": made[1]["id"], "city": "Alexandria", "unitLocation": None, "gallery": None},
            {"id": made[2]["id"], "name": "Renamed", "bedrooms": 5, "unitDesc": None},
        ],
    }
    response = await _send(api, "PUT", "/api/v2/units/bulk/update", body)
    assert response.status_code == 200, response.text
    assert response.json()["succeeded"] == 3
    for unit in made:
        await assert_columns_agree(api, unit["id"])
    async with api.context.db.read() as conn:
        query = select(units.c.lng, units.c.has_gallery).where(
            units.c.id == uuid.UUID(made[1]["id"])
        )
        assert (await conn.execute(query)).one() == (None, False)


async def test_updates_written_together_that_set_other_columns_each_keep_theirs(
    both_api: Api,
) -> None:
    """PATCHes of several units arriving together (gathered into one batch) change different
    fields: each unit's columns agree with its record, and none took another's."""
    made = [await both_api.create_unit(**fake_unit(random.Random(seed))) for seed in range(9, 17)]
    patches: list[dict[str, Any]] = [
        {"price": 2_100_000},
        {"city": "Luxor"},
        {"unitLocation": {"type": "Point", "coordinates": [32.64, 25.69]}},
        {"gallery": [], "bedrooms": 6},
        {"name": "Together", "price": 2_200_000},
        {"unitDesc": None},
        {"surface": 155, "city": "Aswan"},
        {"unitLocation": None},
    ]
    answers = await asyncio.gather(
        *(_patch(both_api, unit["id"], patch) for unit, patch in zip(made, patches, strict=True))
    )
    assert answers == [200] * len(made)
    for unit, patch in zip(made, patches, strict=True):
        row = await assert_columns_agree(both_api, unit["id"])
        assert row["version"] == unit["version"] + 1
        record = orjson.loads(row["doc"])
        assert {field: record.get(field) for field in patch} == orjson.loads(dumps(patch))
