"""The change feed over HTTP, on both databases."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from tests.conftest import READY_UNIT, Api, start_api
from units_api.clock import utcnow
from units_api.config import Settings
from units_api.events.service import prune
from units_api.events.tables import events
from units_api.migrate import upgrade

FEED = "/api/v2/events"


async def feed_end(api: Api, key: str | None = None) -> str:
    """The feed's current end, without reading it: a type no test writes matches nothing."""
    response = await api.request("GET", FEED, key=key, params={"types": "import.failed"})
    assert response.status_code == 200, response.text
    cursor: str = response.json()["nextCursor"]
    return cursor


async def follow(
    api: Api, after: str, key: str | None = None, **params: Any
) -> tuple[list[dict[str, Any]], str]:
    """Every event after `after`, following cursors until a page comes back empty."""
    found: list[dict[str, Any]] = []
    while True:
        response = await api.request("GET", FEED, key=key, params={"after": after, **params})
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["nextCursor"] is not None
        found += body["data"]
        if not body["data"]:
            return found, body["nextCursor"]
        after = body["nextCursor"]


def of(found: list[dict[str, Any]], unit_id: str) -> list[dict[str, Any]]:
    return [event for event in found if event["unitId"] == unit_id]


async def test_a_units_changes_are_in_the_feed_in_order_when_each_write_returns(
    api: Api,
) -> None:
    start = await feed_end(api)
    unit = await api.create_unit(**READY_UNIT)
    found, cursor = await follow(api, start)
    (created,) = of(found, unit["id"])
    assert created["type"] == "unit.created" and created["version"] == 1
    assert created["data"]["unit"] == unit
    assert set(created) == {"id", "type", "occurredAt", "unitId", "version", "actor", "data"}
    assert created["actor"]["type"] == "apiKey"

    patched = await api.request("PATCH", f"/api/v2/units/{unit['id']}", json={"price": 2600000.50})
    assert patched.status_code == 200
    found, cursor = await follow(api, cursor)
    (updated,) = of(found, unit["id"])
    assert updated["type"] == "unit.updated" and updated["version"] == 2
    assert updated["data"]["changes"] == {"price": {"from": 2500000, "to": 2600000.50}}
    assert updated["data"]["unit"]["price"] == 2600000.50

    unchanged = await api.request(
        "PATCH", f"/api/v2/units/{unit['id']}", json={"price": 2600000.50}
    )
    assert unchanged.status_code == 200
    published = await api.request(
        "PUT", f"/api/v2/units/publishing-actions/{unit['id']}", json={"action": "publish"}
    )
    assert published.status_code == 200, published.text
    deleted = await api.request("DELETE", f"/api/v2/units/{unit['id']}")
    assert deleted.status_code == 204
    found, end = await follow(api, cursor)
    assert [(e["type"], e["version"]) for e in of(found, unit["id"])] == [
        ("unit.published", 3),
        ("unit.deleted", 4),
    ]
    assert of(found, unit["id"])[1]["data"]["unit"]["publishing"]["status"] == "published"
    again, same = await follow(api, end)
    assert of(again, unit["id"]) == [] and int(same) >= int(end)


async def test_pages_never_repeat_or_skip_and_types_filter(api: Api) -> None:
    start = await feed_end(api)
    project = uuid.uuid4().hex
    units = [await api.create_unit(subProjectId=project) for _ in range(5)]
    for unit in units[:2]:
        response = await api.request(
            "PATCH", f"/api/v2/units/{unit['id']}", json={"name": "Renamed"}
        )
        assert response.status_code == 200
    ids = {unit["id"] for unit in units}
    paged, _ = await follow(api, start, limit=1)
    mine = [event for event in paged if event["unitId"] in ids]
    whole, _ = await follow(api, start, limit=1000)
    assert mine == [event for event in whole if event["unitId"] in ids]
    assert len(mine) == 7 and len({event["id"] for event in mine}) == 7
    updates, _ = await follow(api, start, types="unit.updated, unit.deleted")
    assert sorted(e["unitId"] for e in updates if e["unitId"] in ids) == sorted(
        unit["id"] for unit in units[:2]
    )


@pytest.mark.parametrize(
    ("params", "parameter"),
    [
        ({"after": "abc"}, "after"),
        ({"after": "-1"}, "after"),
        ({"after": "99999999999999"}, "after"),
        ({"limit": "0"}, "limit"),
        ({"limit": "1001"}, "limit"),
        ({"types": "unit.exploded"}, "types"),
        ({"types": ","}, "types"),
    ],
)
async def test_bad_parameters_are_400s_naming_them(
    api: Api, params: dict[str, str], parameter: str
) -> None:
    response = await api.request("GET", FEED, params=params)
    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["parameter"] == parameter


async def test_the_feed_needs_the_events_scope(api: Api) -> None:
    reader = await api.create_key("units:read")
    assert (await api.request("GET", FEED, key=reader)).status_code == 403
    follower = await api.create_key("events:read")
    assert (await api.request("GET", FEED, key=follower)).status_code == 200


async def test_a_key_with_a_policy_reads_only_its_units_events(api: Api) -> None:
    project = uuid.uuid4().hex
    key = await api.create_key("events:read", policy=f"subProjectId=={project};city==Giza")
    start = await feed_end(api, key)
    inside = await api.create_unit(subProjectId=project, city="Giza")
    outside = await api.create_unit(subProjectId=project, city="Cairo")
    moved_out = await api.request(
        "PATCH", f"/api/v2/units/{inside['id']}", json={"city": "Alexandria"}
    )
    assert moved_out.status_code == 200
    moved_in = await api.request("PATCH", f"/api/v2/units/{outside['id']}", json={"city": "Giza"})
    assert moved_in.status_code == 200
    gone = await api.request("DELETE", f"/api/v2/units/{outside['id']}")
    assert gone.status_code == 204
    seen, _ = await follow(api, start, key=key, limit=1)
    assert [(e["unitId"], e["type"], e.get("left", False)) for e in seen] == [
        (inside["id"], "unit.created", False),
        (inside["id"], "unit.updated", True),  # it left the policy: only its id is told
        (outside["id"], "unit.updated", False),
        (outside["id"], "unit.deleted", False),
    ]
    assert seen[1]["data"] == {"unitId": inside["id"]}


@pytest.fixture(params=["sqlite", "postgresql"])
def own_database(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/feed.db"
        upgrade(url)
        yield url
        return
    from tests.conftest import fresh_postgres

    with fresh_postgres("units_feed") as url:
        upgrade(url)
        yield url


async def test_pruned_events_make_an_old_cursor_a_410(own_database: str) -> None:
    settings = Settings(database_url=own_database, access_log=False, run_jobs=False)
    async for api in start_api(settings):
        old = [await api.create_unit() for _ in range(3)]
        kept = await api.create_unit()
        long_ago = utcnow() - timedelta(days=91)
        async with api.context.db.transaction() as conn:
            await conn.execute(
                update(events)
                .where(events.c.unit_id.in_([uuid.UUID(unit["id"]) for unit in old]))
                .values(occurred_at=long_ago)
            )
        first, _ = await follow(api, "0")
        assert [e["unitId"] for e in first] == [u["id"] for u in [*old, kept]]
        # Not yet fanned out to webhooks: kept until it is.
        assert await prune(api.context.db, 90) == 0
        async with api.context.db.transaction() as conn:
            from units_api.events import repository

            await repository.set_position(conn, "webhooks", 4)
        assert await prune(api.context.db, 90) == 3
        expired = await api.request("GET", FEED, params={"after": "0"})
        assert expired.status_code == 410
        assert expired.headers["content-type"] == "application/problem+json"
        assert expired.json()["currentCursor"] == "4"
        remaining, end = await follow(api, "3")
        assert [e["unitId"] for e in remaining] == [kept["id"]] and end == "4"
        from_start = await api.request("GET", FEED)
        assert [e["unitId"] for e in from_start.json()["data"]] == [kept["id"]]
        await asyncio.sleep(0)
