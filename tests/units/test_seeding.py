"""Seeding writes whole units: search words, history, events and the counter, on both paths
(COPY on PostgreSQL, inserts on SQLite)."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select, text

from tests.conftest import Api
from units_api.events.tables import events
from units_api.units.changes import COPY_FROM
from units_api.units.seeding import batch_rows, seed_units
from units_api.units.tables import unit_history, units


async def counts(api: Api) -> dict[str, int]:
    async with api.context.db.read() as conn:
        found = {}
        for name, table in (("units", units), ("history", unit_history), ("events", events)):
            found[name] = int(
                (await conn.execute(select(func.count()).select_from(table))).scalar_one()
            )
        found["search"] = int(
            (await conn.execute(text("SELECT count(*) FROM unit_search"))).scalar_one()
        )
    listed = await api.request("GET", "/api/v2/units/?limit=1")
    found["total"] = listed.json()["meta"]["total"]
    return found


@pytest.mark.parametrize(("count", "batch"), [(250, 100), (COPY_FROM + 10, COPY_FROM + 10)])
async def test_seeding_keeps_every_table_in_step(api: Api, count: int, batch: int) -> None:
    """Small batches go as one statement per batch, large ones (PostgreSQL) through COPY."""
    before = await counts(api)
    assert await seed_units(api.context.db, count, seed=4, batch=batch) == count
    after = await counts(api)
    assert {name: after[name] - before[name] for name in after} == dict.fromkeys(after, count)
    scope = batch_rows(4, 0, 1).units[0]["sub_project_id"]
    found = await api.request("GET", "/api/v2/units/", params={"q": scope.replace("-", " ")})
    assert found.json()["meta"]["total"] >= 1
