"""The event by which a unit leaves a key's policy: a key that mirrors what it may see is told
to drop the unit, by its id alone, on both databases."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from tests.conftest import READY_UNIT, Api
from tests.events.test_feed import feed_end, follow, of

UNITS = "/api/v2/units"
# A left event's fields, in the order of every event's, with `left` before its data.
LEFT_FIELDS = ["id", "type", "occurredAt", "unitId", "version", "actor", "left", "data"]
WEBSITE = "status==published;channel==website"


def told(found: list[dict[str, Any]], unit_id: str) -> list[tuple[str, bool]]:
    """A unit's events as a follower sees them: each type, and whether the unit left."""
    return [(event["type"], event.get("left", False)) for event in of(found, unit_id)]


async def patch(api: Api, unit_id: str, **fields: Any) -> None:
    response = await api.request("PATCH", f"{UNITS}/{unit_id}", json=fields)
    assert response.status_code == 200, response.text


async def act(api: Api, unit_id: str, action: str, **body: Any) -> None:
    response = await api.request(
        "PUT", f"{UNITS}/publishing-actions/{unit_id}", json={"action": action, **body}
    )
    assert response.status_code == 200, response.text


def assert_left_as(event: dict[str, Any], whole: dict[str, Any]) -> None:
    """A left event is the event the admin reads, with `left` and only the unit's id."""
    assert list(event) == LEFT_FIELDS
    assert event == {**whole, "left": True, "data": {"unitId": whole["unitId"]}}


async def test_a_unit_leaving_entering_and_leaving_again_is_told_each_time(api: Api) -> None:
    project = uuid.uuid4().hex
    key = await api.create_key("events:read", policy=f"subProjectId=={project};city==Giza")
    never = await api.create_key("events:read", policy=f"subProjectId=={project};city==Aswan")
    start, key_start = await feed_end(api), await feed_end(api, key)
    unit = await api.create_unit(subProjectId=project, city="Giza")
    unit_id = unit["id"]
    await patch(api, unit_id, city="Alexandria")  # leaves
    await patch(api, unit_id, name="Elsewhere")  # still outside: not for the key
    await patch(api, unit_id, city="Giza")  # enters again: the whole unit
    await patch(api, unit_id, city="Luxor")  # leaves again
    await patch(api, unit_id, city="Giza")
    deleted = await api.request("DELETE", f"{UNITS}/{unit_id}")
    assert deleted.status_code == 204

    seen, _ = await follow(api, key_start, key=key)
    assert told(seen, unit_id) == [
        ("unit.created", False),
        ("unit.updated", True),
        ("unit.updated", False),
        ("unit.updated", True),
        ("unit.updated", False),
        ("unit.deleted", False),
    ]
    assert [event["version"] for event in of(seen, unit_id)] == [1, 2, 4, 5, 6, 7]
    whole = {event["id"]: event for event in of((await follow(api, start))[0], unit_id)}
    for event in of(seen, unit_id):
        if event.get("left"):
            assert_left_as(event, whole[event["id"]])
        else:
            assert event == whole[event["id"]] and "left" not in event
    # A page of one event at a time reads the same.
    assert of((await follow(api, key_start, key=key, limit=1))[0], unit_id) == of(seen, unit_id)
    # A key whose policy the unit never matched is told nothing of it.
    assert of((await follow(api, key_start, key=never))[0], unit_id) == []


async def test_the_website_key_of_the_readme_is_told_when_a_unit_is_unpublished(
    api: Api,
) -> None:
    key = await api.create_key("events:read", policy=WEBSITE)
    start, key_start = await feed_end(api), await feed_end(api, key)
    unit = await api.create_unit(**READY_UNIT)
    unit_id = unit["id"]
    await api.add_channel("app")
    await act(api, unit_id, "publish", channels=["website"])  # appears on the website
    await patch(api, unit_id, price=2400000)
    await act(api, unit_id, "unpublish")  # goes away
    await patch(api, unit_id, name="Unlisted Villa")  # not the website's business
    await act(api, unit_id, "publish", channels=["website", "app"])
    await act(api, unit_id, "publish", channels=["app"])  # taken off the website
    await act(api, unit_id, "publish", channels=["website"])
    await act(api, unit_id, "archive")

    seen, _ = await follow(api, key_start, key=key)
    assert told(seen, unit_id) == [
        ("unit.published", False),
        ("unit.updated", False),
        ("unit.unpublished", True),
        ("unit.published", False),
        ("unit.published", True),
        ("unit.published", False),
        ("unit.archived", True),
    ]
    mine = of(seen, unit_id)
    assert mine[0]["data"]["unit"]["publishing"]["channels"] == ["website"]
    assert mine[1]["data"]["unit"]["price"] == 2400000
    whole = {event["id"]: event for event in of((await follow(api, start))[0], unit_id)}
    for event in mine:
        if event.get("left"):
            assert_left_as(event, whole[event["id"]])
    # Only the left events of a type, when the follower asks for that type.
    unpublished, _ = await follow(api, key_start, key=key, types="unit.unpublished")
    assert told(unpublished, unit_id) == [("unit.unpublished", True)]


async def test_a_bulk_update_that_moves_units_out_tells_each(api: Api) -> None:
    project = uuid.uuid4().hex
    key = await api.create_key("events:read", policy=f"subProjectId=={project};city==Giza")
    key_start = await feed_end(api, key)
    inside = [await api.create_unit(subProjectId=project, city="Giza") for _ in range(3)]
    outside = await api.create_unit(subProjectId=project, city="Cairo")
    items = [{"id": unit["id"], "city": "Aswan"} for unit in [*inside, outside]]
    moved = await api.request("PUT", f"{UNITS}/bulk/update", json={"units": items})
    assert moved.status_code == 200, moved.text
    back = await api.request(
        "PUT",
        f"{UNITS}/bulk/update",
        json={"filter": f"subProjectId=={project}", "patch": {"city": "Giza"}},
    )
    assert back.status_code == 200 and back.json()["updated"] == 4, back.text
    out = await api.request(
        "PUT",
        f"{UNITS}/bulk/update",
        json={"filter": f"subProjectId=={project}", "patch": {"city": "Dahab"}},
    )
    assert out.status_code == 200, out.text

    seen, _ = await follow(api, key_start, key=key)
    for unit in inside:
        assert told(seen, unit["id"]) == [
            ("unit.created", False),
            ("unit.updated", True),
            ("unit.updated", False),
            ("unit.updated", True),
        ]
    assert told(seen, outside["id"]) == [("unit.updated", False), ("unit.updated", True)]
    assert all(e["data"] == {"unitId": e["unitId"]} for e in seen if e.get("left"))


async def test_a_unit_deleted_inside_is_seen_whole_and_one_deleted_outside_not(api: Api) -> None:
    project = uuid.uuid4().hex
    key = await api.create_key("events:read", policy=f"subProjectId=={project};city==Giza")
    key_start = await feed_end(api, key)
    inside = await api.create_unit(subProjectId=project, city="Giza")
    left = await api.create_unit(subProjectId=project, city="Giza")
    await patch(api, left["id"], city="Cairo")
    for unit in (inside, left):
        assert (await api.request("DELETE", f"{UNITS}/{unit['id']}")).status_code == 204
    seen, _ = await follow(api, key_start, key=key)
    assert told(seen, inside["id"]) == [("unit.created", False), ("unit.deleted", False)]
    assert of(seen, inside["id"])[1]["data"]["unit"]["city"] == "Giza"
    assert told(seen, left["id"]) == [("unit.created", False), ("unit.updated", True)]


async def test_a_policy_on_updated_at_judges_the_unit_before_at_its_own_time(api: Api) -> None:
    project = uuid.uuid4().hex
    unit = await api.create_unit(subProjectId=project)
    # Inside as created; any change moves its `updatedAt` past the policy's bound.
    policy = f'subProjectId=={project};updatedAt=le="{unit["updatedAt"]}"'
    key = await api.create_key("events:read", policy=policy)
    key_start = await feed_end(api, key)
    await asyncio.sleep(0.01)
    await patch(api, unit["id"], name="Later")
    await patch(api, unit["id"], name="Later still")
    seen, _ = await follow(api, key_start, key=key)
    assert told(seen, unit["id"]) == [("unit.updated", True)]


async def test_the_document_describes_the_left_event(api: Api) -> None:
    document = (await api.client.get("/openapi.json")).json()
    event = document["components"]["schemas"]["Event"]
    assert event["properties"]["left"]["type"] == "boolean"
    assert "left" not in event["required"] and "data" in event["required"]
    assert "{unitId}" in event["properties"]["data"]["description"]
    feed = document["paths"]["/api/v2/events"]["get"]["description"]
    assert '"left": true' in feed
