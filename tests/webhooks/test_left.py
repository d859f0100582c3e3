"""A webhook's filter tells when a unit leaves it, as a key's policy does in the feed; a filter
with job event types is refused; a refused private target names the setting that allows it."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from tests.conftest import READY_UNIT, Api
from tests.events.test_left import LEFT_FIELDS, WEBSITE, act, patch
from tests.webhooks.receiver import Received, receiver
from tests.webhooks.test_webhooks import HOOKS, SCALE, Hooks, started
from units_api.config import PREFIX, Settings
from units_api.webhooks.guard import ALLOW_PRIVATE

UNITS = "/api/v2/units"


@pytest.fixture
async def hooks(database_url: str, files_dir: str) -> AsyncIterator[Hooks]:
    async for found in started(database_url, files_dir, SCALE):
        yield found


def told(got: list[Received], unit_id: str) -> list[tuple[str, bool]]:
    return [
        (r.event["type"], r.event.get("left", False))
        for r in got
        if r.event.get("unitId") == unit_id
    ]


async def test_a_filtered_webhook_is_told_when_a_unit_leaves_its_filter(hooks: Hooks) -> None:
    api = hooks.api
    async with receiver() as target:
        hook = await hooks.create(target.url, filter=WEBSITE)
        never = await hooks.create(target.url + "?never", filter=f"city=={uuid.uuid4().hex}")
        unit = await api.create_unit(**READY_UNIT)
        unit_id = unit["id"]
        await act(api, unit_id, "publish", channels=["website"])
        await patch(api, unit_id, price=2400000)
        await act(api, unit_id, "unpublish")
        await patch(api, unit_id, name="Unlisted Villa")
        await act(api, unit_id, "publish", channels=["website"])
        deleted = await api.request("DELETE", f"{UNITS}/{unit_id}")
        assert deleted.status_code == 204
        got = await target.wait_for(lambda got: ("unit.deleted", False) in told(got, unit_id))
        assert told(got, unit_id) == [
            ("unit.published", False),
            ("unit.updated", False),
            ("unit.unpublished", True),
            ("unit.published", False),
            ("unit.deleted", False),
        ]
        (left,) = [r for r in got if r.event.get("left")]
        event = left.verify(hook["secret"])  # signed as any other
        assert list(event) == LEFT_FIELDS
        assert event["left"] is True and event["data"] == {"unitId": unit_id}
        assert left.headers["webhook-id"] == event["id"]
        # A webhook whose filter the unit never matched is sent nothing.
        assert await hooks.deliveries(never["id"]) == []

        # Redelivered, it is the same left event.
        (delivery,) = [d for d in await hooks.deliveries(hook["id"]) if d["eventId"] == event["id"]]
        again = await api.request(
            "POST", f"{HOOKS}/{hook['id']}/deliveries/{delivery['id']}/redeliver"
        )
        assert again.status_code == 202, again.text
        got = await target.wait_for(lambda got: sum(r.event["id"] == event["id"] for r in got) == 2)
        assert [r.body for r in got if r.event["id"] == event["id"]] == [left.body] * 2


async def test_a_bulk_update_moving_units_out_of_a_filter_tells_each(hooks: Hooks) -> None:
    api = hooks.api
    project = uuid.uuid4().hex
    async with receiver() as target:
        await hooks.create(
            target.url, eventTypes=["unit.updated"], filter=f"subProjectId=={project};city==Giza"
        )
        units = [await api.create_unit(subProjectId=project, city="Giza") for _ in range(3)]
        items = [{"id": unit["id"], "city": "Aswan"} for unit in units]
        moved = await api.request("PUT", f"{UNITS}/bulk/update", json={"units": items})
        assert moved.status_code == 200, moved.text
        got = await target.wait_for(lambda got: len(got) >= 3)
        assert sorted(r.event["unitId"] for r in got) == sorted(unit["id"] for unit in units)
        assert all(r.event["left"] is True for r in got)
        assert all(r.event["data"] == {"unitId": r.event["unitId"]} for r in got)


JOB_TYPES = ["unit.published", "export.succeeded", "import.failed"]


async def test_a_filter_with_job_event_types_is_a_422(hooks: Hooks) -> None:
    api = hooks.api
    url = "https://crm.example.com/hooks"
    refused = await api.request(
        "POST", HOOKS, json={"url": url, "eventTypes": JOB_TYPES, "filter": "city==Cairo"}
    )
    assert refused.status_code == 422, refused.text
    (error,) = refused.json()["errors"]
    assert error["field"] == "filter"
    assert "export.succeeded, import.failed" in error["message"]

    jobs = await hooks.create(url, eventTypes=JOB_TYPES)
    filtered = await hooks.create(url, eventTypes=["unit.published"], filter="city==Cairo")
    for hook, body, field in (
        (jobs, {"filter": "city==Cairo"}, "filter"),
        (filtered, {"eventTypes": JOB_TYPES}, "eventTypes"),
        (filtered, {"eventTypes": JOB_TYPES, "filter": "city==Giza"}, "filter"),
    ):
        response = await api.request("PATCH", f"{HOOKS}/{hook['id']}", json=body)
        assert response.status_code == 422, response.text
        assert [e["field"] for e in response.json()["errors"]] == [field]
    assert (await hooks.get(filtered["id"]))["eventTypes"] == ["unit.published"]
    # Without the filter, or with every type, it is taken.
    allowed = await api.request(
        "PATCH", f"{HOOKS}/{filtered['id']}", json={"eventTypes": JOB_TYPES, "filter": None}
    )
    assert allowed.status_code == 200, allowed.text
    every = await api.request("PATCH", f"{HOOKS}/{jobs['id']}", json={"eventTypes": ["*"]})
    assert every.status_code == 200, every.text
    every = await api.request("PATCH", f"{HOOKS}/{jobs['id']}", json={"filter": "city==Cairo"})
    assert every.status_code == 200, every.text


def test_the_setting_that_allows_private_targets_is_one() -> None:
    assert ALLOW_PRIVATE.startswith(PREFIX)
    assert ALLOW_PRIVATE.removeprefix(PREFIX).lower() in Settings.model_fields


async def test_a_refused_private_target_names_the_setting_that_allows_it(api: Api) -> None:
    for url in ("http://127.0.0.1:9/h", "http://localhost:9/h"):
        response = await api.request("POST", HOOKS, json={"url": url, "eventTypes": ["*"]})
        assert response.status_code == 422, response.text
        (error,) = response.json()["errors"]
        assert error["field"] == "url"
        assert f"{ALLOW_PRIVATE}=true" in error["message"], error
