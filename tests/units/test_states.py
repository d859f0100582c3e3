"""Publishing and availability over HTTP: every cell of both transition tables, readiness,
scopes, If-Match, history and events, and the scheduler acting on time."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import func, select

from tests.conftest import READY_UNIT, Api, start_api
from units_api.config import Settings
from units_api.events.tables import events
from units_api.units.states import (
    AVAILABILITY,
    AVAILABILITY_ACTIONS,
    PUBLISHING,
    PUBLISHING_ACTIONS,
)


def later(seconds: float = 3600) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def publishing_body(action: str) -> dict[str, Any]:
    return {"action": action, "at": later()} if action == "schedule" else {"action": action}


def availability_body(action: str) -> dict[str, Any]:
    return {"action": action, "until": later()} if action == "reserve" else {"action": action}


async def publish_action(api: Api, unit_id: str, body: dict[str, Any], **kw: Any) -> Any:
    return await api.request("PUT", f"/api/v2/units/publishing-actions/{unit_id}", json=body, **kw)


async def availability_action(api: Api, unit_id: str, body: dict[str, Any], **kw: Any) -> Any:
    return await api.request(
        "PUT", f"/api/v2/units/availability-actions/{unit_id}/", json=body, **kw
    )


PUBLISHING_PATHS = {
    "draft": [],
    "scheduled": ["schedule"],
    "published": ["publish"],
    "unpublished": ["publish", "unpublish"],
    "archived": ["archive"],
}
AVAILABILITY_PATHS = {
    "available": [],
    "reserved": ["reserve"],
    "blocked": ["block"],
    "sold": ["sell"],
}


@pytest.mark.parametrize("state", list(PUBLISHING))
async def test_every_publishing_cell(api: Api, state: str) -> None:
    for action in PUBLISHING_ACTIONS:
        unit = await api.create_unit(**READY_UNIT)
        for step in PUBLISHING_PATHS[state]:
            assert (await publish_action(api, unit["id"], publishing_body(step))).status_code == 200
        response = await publish_action(api, unit["id"], publishing_body(action))
        expected = PUBLISHING[state].get(action)
        if expected is None:
            assert response.status_code == 409, (state, action, response.text)
            problem = response.json()
            assert problem["allowedActions"] == list(PUBLISHING[state])
            assert response.headers["content-type"] == "application/problem+json"
        else:
            assert response.status_code == 200, (state, action, response.text)
            publishing = response.json()["publishing"]
            assert publishing["status"] == expected
            assert (publishing["scheduledAt"] is not None) == (expected == "scheduled")
            if expected in ("published", "unpublished"):
                assert publishing["publishedAt"] is not None
            if action == "restore":
                assert publishing["publishedAt"] is None
            assert response.json()["version"] == 2 + len(PUBLISHING_PATHS[state])


@pytest.mark.parametrize("state", list(AVAILABILITY))
async def test_every_availability_cell(api: Api, state: str) -> None:
    for action in AVAILABILITY_ACTIONS:
        unit = await api.create_unit()
        for step in AVAILABILITY_PATHS[state]:
            assert (
                await availability_action(api, unit["id"], availability_body(step))
            ).status_code == 200
        response = await availability_action(api, unit["id"], availability_body(action))
        expected = AVAILABILITY[state].get(action)
        if expected is None:
            assert response.status_code == 409, (state, action, response.text)
            assert response.json()["allowedActions"] == list(AVAILABILITY[state])
        else:
            assert response.status_code == 200, (state, action, response.text)
            availability = response.json()["availability"]
            assert availability["status"] == expected
            assert (availability["reservedUntil"] is not None) == (expected == "reserved")


async def test_publishing_needs_a_ready_unit(api: Api) -> None:
    bare = await api.create_unit(city=None)
    for action in ("publish", "schedule"):
        response = await publish_action(api, bare["id"], publishing_body(action))
        assert response.status_code == 422
        assert {e["field"] for e in response.json()["errors"]} == {"city", "price", "image"}
    gallery_only = await api.create_unit(
        **{**READY_UNIT, "unitImageUrl": None, "gallery": ["https://cdn.example.com/g.jpg"]}
    )
    assert (await publish_action(api, gallery_only["id"], {"action": "publish"})).status_code == 200
    free = await api.create_unit(**{**READY_UNIT, "price": 0})
    assert (await publish_action(api, free["id"], {"action": "publish"})).status_code == 422


async def test_readiness_rules_are_configurable(database_url: str) -> None:
    settings = Settings(database_url=database_url, access_log=False, publish_requires="name")
    async for api in start_api(settings):
        bare = await api.create_unit(city=None)
        assert (await publish_action(api, bare["id"], {"action": "publish"})).status_code == 200


async def test_channels_times_and_edits_of_a_published_unit(api: Api) -> None:
    unit = await api.create_unit(**READY_UNIT)
    await api.add_channel("app")
    first = await publish_action(api, unit["id"], {"action": "publish", "channels": ["website"]})
    published = first.json()["publishing"]
    assert published["channels"] == ["website"]
    again = await publish_action(
        api, unit["id"], {"action": "publish", "channels": ["website", "app"]}
    )
    assert again.json()["publishing"]["channels"] == ["website", "app"]
    assert again.json()["publishing"]["publishedAt"] == published["publishedAt"]
    edited = await api.request("PATCH", f"/api/v2/units/{unit['id']}", json={"price": 2600000})
    assert edited.json()["publishing"]["status"] == "published"
    found = await api.request(
        "GET",
        "/api/v2/units/",
        params={"p": f"id=={unit['id']};status==published;channel==app;availability==available"},
    )
    assert found.json()["meta"]["total"] == 1


async def test_bad_action_bodies(api: Api) -> None:
    unit = await api.create_unit(**READY_UNIT)
    past = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()
    cases = [
        ({"action": "schedule"}, "at"),
        ({"action": "schedule", "at": past}, "at"),
        ({"action": "schedule", "at": "soon"}, "at"),
        ({"action": "publish", "at": later()}, "at"),
        ({"action": "fly"}, "action"),
        ({"action": "publish", "channels": [""]}, "channels[0]"),
    ]
    for body, field in cases:
        response = await publish_action(api, unit["id"], body)
        assert response.status_code == 422, body
        assert field in [e["field"] for e in response.json()["errors"]], body
    for body, field in [
        ({"action": "reserve"}, "until"),
        ({"action": "reserve", "until": past}, "until"),
        ({"action": "sell", "until": later()}, "until"),
    ]:
        response = await availability_action(api, unit["id"], body)
        assert response.status_code == 422 and response.json()["errors"][0]["field"] == field
    missing = f"/api/v2/units/publishing-actions/{uuid.uuid4()}"
    assert (await api.request("PUT", missing, json={"action": "publish"})).status_code == 404


async def test_scopes_if_match_history_and_events(api: Api) -> None:
    unit = await api.create_unit(**READY_UNIT)
    writer = await api.create_key("units:write", "units:read")
    assert (
        await publish_action(api, unit["id"], {"action": "publish"}, key=writer)
    ).status_code == 403
    assert (
        await availability_action(api, unit["id"], {"action": "block"}, key=writer)
    ).status_code == 200
    stale = await publish_action(
        api, unit["id"], {"action": "publish"}, headers={"If-Match": '"1"'}
    )
    assert stale.status_code == 412
    done = await publish_action(api, unit["id"], {"action": "publish"}, headers={"If-Match": '"2"'})
    assert done.status_code == 200 and done.headers["etag"] == '"3"'
    history = (await api.request("GET", f"/api/v2/units/{unit['id']}/history")).json()["data"]
    assert [entry["action"] for entry in history] == ["publish", "block", "create"]
    assert history[0]["changes"]["publishing"]["to"]["status"] == "published"
    async with api.context.db.read() as conn:
        types = (
            (
                await conn.execute(
                    select(events.c.type)
                    .where(events.c.unit_id == uuid.UUID(unit["id"]))
                    .order_by(events.c.seq)
                )
            )
            .scalars()
            .all()
        )
    assert list(types) == ["unit.created", "unit.blocked", "unit.published"]


async def count_events(api: Api, unit_id: str, event_type: str) -> int:
    async with api.context.db.read() as conn:
        query = (
            select(func.count())
            .select_from(events)
            .where(events.c.unit_id == uuid.UUID(unit_id), events.c.type == event_type)
        )
        return int((await conn.execute(query)).scalar_one())


async def wait_for(api: Api, unit_id: str, check: Any, seconds: float = 8) -> dict[str, Any]:
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        unit = (await api.request("GET", f"/api/v2/units/{unit_id}")).json()
        if check(unit) or asyncio.get_running_loop().time() > deadline:
            return unit  # type: ignore[no-any-return]
        await asyncio.sleep(0.2)


async def test_the_scheduler_publishes_and_releases_on_time(api: Api) -> None:
    unit = await api.create_unit(**READY_UNIT)
    scheduled = await publish_action(api, unit["id"], {"action": "schedule", "at": later(1.2)})
    assert scheduled.json()["publishing"]["status"] == "scheduled"
    held = await availability_action(api, unit["id"], {"action": "reserve", "until": later(1.2)})
    assert held.json()["availability"]["status"] == "reserved"
    after = await wait_for(
        api,
        unit["id"],
        lambda u: (
            u["publishing"]["status"] == "published" and u["availability"]["status"] == "available"
        ),
    )
    assert after["publishing"]["status"] == "published"
    assert after["publishing"]["scheduledAt"] is None
    assert after["availability"] == {
        **after["availability"],
        "status": "available",
        "reservedUntil": None,
    }
    assert await count_events(api, unit["id"], "unit.published") == 1
    assert await count_events(api, unit["id"], "unit.released") == 1
    history = (await api.request("GET", f"/api/v2/units/{unit['id']}/history")).json()["data"]
    assert {entry["actor"]["type"] for entry in history[:2]} == {"system"}
