"""Concurrent writers on PostgreSQL: every update lands, none is lost."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from sqlalchemy import select

from tests.conftest import Api
from units_api.events.tables import events
from units_api.units import changes, repository
from units_api.units.record import UnitRecord

WRITERS = 12
ROUNDS = 5
TEXT_FIELDS = (
    "location",
    "city",
    "subProjectId",
    "priceBase",
    "unitNameAr",
    "unitDesc",
    "unitDescAr",
    "unitShortDesc",
    "unitShortDescAr",
    "name",
    "type",
)


async def test_if_match_retry_loops_lose_no_increment(pg_api: Api) -> None:
    api = pg_api
    unit = await api.create_unit(guaranty=0)
    path = f"/api/v2/units/{unit['id']}"
    conflicts = 0

    async def increment() -> None:
        nonlocal conflicts
        for _ in range(ROUNDS):
            while True:
                current = await api.request("GET", path)
                value = current.json()["guaranty"] + 1
                response = await api.request(
                    "PATCH",
                    path,
                    json={"guaranty": value},
                    headers={"If-Match": current.headers["etag"]},
                )
                if response.status_code == 200:
                    break
                assert response.status_code == 412, response.text
                conflicts += 1

    await asyncio.gather(*(increment() for _ in range(WRITERS)))
    final = (await api.request("GET", path)).json()
    assert final["guaranty"] == WRITERS * ROUNDS
    assert final["version"] == 1 + WRITERS * ROUNDS
    history = (await api.request("GET", f"{path}/history?limit=200")).json()["data"]
    assert len(history) == 1 + WRITERS * ROUNDS
    assert conflicts > 0  # the writers really did collide


async def test_concurrent_patches_of_different_fields_all_land(pg_api: Api) -> None:
    api = pg_api
    unit = await api.create_unit()
    path = f"/api/v2/units/{unit['id']}"
    responses = await asyncio.gather(
        *(api.request("PATCH", path, json={field: f"value of {field}"}) for field in TEXT_FIELDS)
    )
    assert all(response.status_code == 200 for response in responses)
    final = (await api.request("GET", path)).json()
    for field in TEXT_FIELDS:
        assert final[field] == f"value of {field}"
    assert final["version"] == 1 + len(TEXT_FIELDS)
    assert sorted(r.json()["version"] for r in responses) == list(range(2, 2 + len(TEXT_FIELDS)))


async def test_many_concurrent_patches_write_one_history_entry_and_event_each(
    pg_api: Api,
) -> None:
    """More writers than unlocked tries: some fall back to the row lock; none writes twice."""
    api = pg_api
    unit = await api.create_unit()
    path = f"/api/v2/units/{unit['id']}"
    writers = 24
    responses = await asyncio.gather(
        *(api.request("PATCH", path, json={"surface": 100 + n}) for n in range(writers))
    )
    assert all(response.status_code == 200 for response in responses)
    assert sorted(r.json()["version"] for r in responses) == list(range(2, 2 + writers))
    async with api.context.db.read() as conn:
        query = select(events.c.version).where(events.c.unit_id == uuid.UUID(unit["id"]))
        versions = sorted((await conn.execute(query)).scalars())
    assert versions == list(range(1, 2 + writers))
    history = (await api.request("GET", f"{path}/history?limit=200")).json()["data"]
    assert sorted(entry["version"] for entry in history) == list(range(1, 2 + writers))


async def test_a_stale_update_writes_nothing(api: Api) -> None:
    unit = await api.create_unit()
    unit_id = uuid.UUID(unit["id"])
    patched = await api.request("PATCH", f"/api/v2/units/{unit['id']}", json={"surface": 90})
    assert patched.status_code == 200
    async with api.context.db.transaction() as conn:
        row = await repository.fetch_current(conn, unit_id)
        assert row is not None
        stale = UnitRecord.from_row(unit_id, row)
        stale.version -= 1  # as read before the PATCH
        stale.fields["surface"] = 120
        change = changes.Change(stale, "patch", "unit.updated", {"surface": {}}, search=False)
        with pytest.raises(changes.Moved):
            await changes.write(conn, "update", [change], {"type": "system"})
    current = (await api.request("GET", f"/api/v2/units/{unit['id']}")).json()
    history = (await api.request("GET", f"/api/v2/units/{unit['id']}/history")).json()["data"]
    assert (current["version"], current["surface"], len(history)) == (2, 90, 2)
