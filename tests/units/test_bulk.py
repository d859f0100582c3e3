"""Bulk update: atomic and partial items, by filter, policies, idempotency, and races."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from sqlalchemy import func, select

from tests.conftest import Api
from units_api.clock import format_time
from units_api.events.tables import events
from units_api.units.seeding import seed_units
from units_api.units.tables import unit_history


async def bulk(api: Api, body: dict[str, Any], **kw: Any) -> Any:
    return await api.request("PUT", "/api/v2/units/bulk/update", json=body, **kw)


async def traces(api: Api) -> tuple[int, int]:
    async with api.context.db.read() as conn:
        history = (await conn.execute(select(func.count()).select_from(unit_history))).scalar_one()
        outbox = (await conn.execute(select(func.count()).select_from(events))).scalar_one()
    return int(history), int(outbox)


async def test_atomic_items_apply_with_versions_history_and_events(api: Api) -> None:
    units = [await api.create_unit(price=i) for i in range(3)]
    before = await traces(api)
    response = await bulk(
        api,
        {
            "units": [
                {"id": units[0]["id"], "version": 1, "price": 100},
                {"id": units[1]["id"], "city": "Dubai"},
                {"id": units[2]["id"], "price": 2},  # no change
            ]
        },
    )
    assert response.status_code == 200, response.text
    assert response.json() == {
        "results": [
            {"id": units[0]["id"], "status": 200, "version": 2},
            {"id": units[1]["id"], "status": 200, "version": 2},
            {"id": units[2]["id"], "status": 200, "version": 1},
        ],
        "succeeded": 3,
        "failed": 0,
    }
    assert await traces(api) == (before[0] + 2, before[1] + 2)
    first = (await api.request("GET", f"/api/v2/units/{units[0]['id']}")).json()
    assert first["price"] == 100 and first["version"] == 2
    history = (await api.request("GET", f"/api/v2/units/{units[0]['id']}/history")).json()["data"]
    assert history[0]["action"] == "bulk"
    assert history[0]["changes"]["price"] == {"from": 0, "to": 100}


async def test_an_atomic_failure_changes_nothing_and_lists_each_item(api: Api) -> None:
    units = [await api.create_unit(price=1) for _ in range(3)]
    before = await traces(api)
    missing = str(uuid.uuid4())
    response = await bulk(
        api,
        {
            "units": [
                {"id": units[0]["id"], "price": 5},
                {"id": units[1]["id"], "version": 9, "price": 5},
                {"id": units[2]["id"], "price": -5},
                {"id": missing, "price": 5},
            ]
        },
    )
    assert response.status_code == 422
    problem = response.json()
    assert problem["type"] == "/problems/bulk-failed"
    assert [(e["index"], e["status"]) for e in problem["errors"]] == [(1, 412), (2, 422), (3, 404)]
    assert problem["errors"][1]["errors"] == [
        {"field": "price", "message": "must be greater than or equal to 0"}
    ]
    assert await traces(api) == before
    for unit in units:
        again = (await api.request("GET", f"/api/v2/units/{unit['id']}")).json()
        assert again["version"] == 1 and again["price"] == 1


async def test_partial_mode_reports_each_item_truly(api: Api) -> None:
    units = [await api.create_unit(price=1) for _ in range(3)]
    response = await bulk(
        api,
        {
            "atomic": False,
            "units": [
                {"id": units[0]["id"], "price": 5},
                {"id": units[1]["id"], "version": 9, "price": 5},
                {"id": units[2]["id"], "notes": "typo"},
            ],
        },
    )
    assert response.status_code == 200
    body = response.json()
    assert [r["status"] for r in body["results"]] == [200, 412, 422]
    assert body["succeeded"] == 1 and body["failed"] == 2
    assert body["results"][2]["error"]["errors"] == [{"field": "notes", "message": "unknown field"}]
    assert (await api.request("GET", f"/api/v2/units/{units[0]['id']}")).json()["price"] == 5
    assert (await api.request("GET", f"/api/v2/units/{units[1]['id']}")).json()["version"] == 1


async def test_request_level_errors(api: Api) -> None:
    unit = await api.create_unit()
    assert (await bulk(api, {"units": []})).status_code == 422
    assert (await bulk(api, {"units": [{"id": unit["id"]}] * 2})).status_code == 422
    over = {"units": [{"id": str(uuid.uuid4())} for _ in range(1001)]}
    assert (await bulk(api, over)).status_code == 422
    assert (await bulk(api, {"nothing": 1})).status_code == 422
    assert (await bulk(api, {"filter": "city==", "patch": {}})).status_code == 400
    bad_patch = await bulk(api, {"filter": "city==x", "patch": {"colour": "red"}})
    assert bad_patch.json()["errors"][0]["field"] == "patch.colour"


async def test_by_filter_with_dry_run(api: Api) -> None:
    scope = f"b-{uuid.uuid4().hex[:8]}"
    units = [await api.create_unit(subProjectId=scope, guaranty=0) for _ in range(4)]
    await api.create_unit(subProjectId=f"{scope}-other")
    dry = await bulk(
        api, {"filter": f"subProjectId=={scope}", "patch": {"guaranty": 3}, "dryRun": True}
    )
    assert dry.json() == {"matched": 4}
    assert (await api.request("GET", f"/api/v2/units/{units[0]['id']}")).json()["guaranty"] == 0
    real = await bulk(api, {"filter": f"subProjectId=={scope}", "patch": {"guaranty": 3}})
    assert real.json() == {"matched": 4, "updated": 4}
    listed = await api.request(
        "GET", "/api/v2/units/", params={"p": f"subProjectId=={scope};guaranty==3"}
    )
    assert listed.json()["meta"]["total"] == 4
    invalid = await bulk(api, {"filter": f"subProjectId=={scope}", "patch": {"name": None}})
    assert invalid.status_code == 422 and len(invalid.json()["errors"]) == 4


async def test_policies_in_bulk(api: Api) -> None:
    scope = f"b-{uuid.uuid4().hex[:8]}"
    inside = await api.create_unit(city="Alexandria", subProjectId=scope)
    other = await api.create_unit(city="Alexandria", subProjectId=scope)
    hidden = await api.create_unit(city="Cairo", subProjectId=scope)
    key = await api.create_key("units:read", "units:write", policy="city==Alexandria")
    response = await bulk(
        api,
        {
            "atomic": False,
            "units": [
                {"id": inside["id"], "price": 7},
                {"id": other["id"], "city": "Cairo"},
                {"id": hidden["id"], "price": 7},
            ],
        },
        key=key,
    )
    assert [r["status"] for r in response.json()["results"]] == [200, 403, 404]
    assert (await api.request("GET", f"/api/v2/units/{inside['id']}")).json()["price"] == 7
    assert (await api.request("GET", f"/api/v2/units/{other['id']}")).json()["city"] == "Alexandria"
    atomic = await bulk(
        api,
        {"units": [{"id": inside["id"], "price": 8}, {"id": other["id"], "city": "Cairo"}]},
        key=key,
    )
    assert atomic.status_code == 422
    assert [e["status"] for e in atomic.json()["errors"]] == [403]
    assert (await api.request("GET", f"/api/v2/units/{inside['id']}")).json()["price"] == 7
    by_filter = await bulk(
        api, {"filter": f"subProjectId=={scope}", "patch": {"guaranty": 1}}, key=key
    )
    assert by_filter.json() == {"matched": 2, "updated": 2}


async def test_bulk_honours_idempotency_keys(api: Api) -> None:
    unit = await api.create_unit(price=1)
    body = {"units": [{"id": unit["id"], "price": 9}]}
    first = await bulk(api, body, headers={"Idempotency-Key": "bulk-1"})
    again = await bulk(api, body, headers={"Idempotency-Key": "bulk-1"})
    assert again.headers["idempotent-replayed"] == "true" and again.json() == first.json()
    assert (await api.request("GET", f"/api/v2/units/{unit['id']}")).json()["version"] == 2


async def test_bulk_racing_single_patches_loses_nothing(pg_api: Api) -> None:
    api = pg_api
    units = [await api.create_unit() for _ in range(25)]
    single = [
        api.request("PATCH", f"/api/v2/units/{u['id']}", json={"city": f"City {i}"})
        for i, u in enumerate(units)
    ]
    batch = bulk(
        api, {"units": [{"id": u["id"], "location": f"Zone {i}"} for i, u in enumerate(units)]}
    )
    responses = await asyncio.gather(batch, *single)
    assert all(r.status_code == 200 for r in responses), [r.text for r in responses]
    for i, unit in enumerate(units):
        final = (await api.request("GET", f"/api/v2/units/{unit['id']}")).json()
        assert final["city"] == f"City {i}" and final["location"] == f"Zone {i}"
        assert final["version"] == 3


async def test_items_without_a_valid_id_are_reported(api: Api) -> None:
    response = await bulk(api, {"atomic": False, "units": [{"price": 1}, {"id": "x", "price": 1}]})
    assert [(r["id"], r["status"]) for r in response.json()["results"]] == [(None, 422), ("x", 422)]


async def test_by_filter_refuses_more_than_ten_thousand_units(pg_api: Api) -> None:
    api = pg_api
    async with api.context.db.read() as conn:
        start = (await conn.execute(select(func.now()))).scalar_one()
    await seed_units(api.context.db, 10_001, seed=8)
    since = format_time(start)
    body = {"filter": f"createdAt=ge={since}", "patch": {"guaranty": 1}}
    refused = await bulk(api, body)
    assert refused.status_code == 422
    assert refused.json()["errors"][0]["field"] == "filter"
    assert (await bulk(api, {**body, "dryRun": True})).status_code == 422
    fewer = await bulk(
        api, {"filter": f"createdAt=ge={since};city==Dubai", "patch": body["patch"], "dryRun": True}
    )
    assert 0 < fewer.json()["matched"] < 10_000
