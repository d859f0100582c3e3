"""The query endpoint: keyset walks, projection, aggregates, policies and errors."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from tests.conftest import Api


async def query(api: Api, body: dict[str, Any], key: str | None = None) -> Any:
    response = await api.request("POST", "/api/v2/units/query", json=body, key=key)
    assert response.status_code == 200, response.text
    return response.json()


async def walk(api: Api, body: dict[str, Any]) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    cursor = None
    for _ in range(100):
        page = await query(api, {**body, **({"cursor": cursor} if cursor else {})})
        seen += page["data"]
        cursor = page["nextCursor"]
        if cursor is None:
            return seen
    raise AssertionError("the walk did not end")


async def populate(api: Api, count: int) -> tuple[str, list[dict[str, Any]]]:
    scope = f"q-{uuid.uuid4().hex[:8]}"
    cities = ["Cairo", "Dubai", "Riyadh", None]
    units = [
        await api.create_unit(
            name=f"Unit {i % 4}",
            city=cities[i % 4],
            subProjectId=scope,
            price=None if i % 5 == 0 else (i % 3) * 1000 + 500,
        )
        for i in range(count)
    ]
    return scope, units


@pytest.mark.parametrize(
    "sort",
    [
        [],
        [{"field": "price", "order": "asc"}],
        [{"field": "price", "order": "desc"}, {"field": "name", "order": "asc"}],
        [{"field": "city", "order": "asc"}, {"field": "createdAt", "order": "desc"}],
    ],
)
async def test_cursor_walks_visit_every_unit_once_in_order(
    api: Api, sort: list[dict[str, str]]
) -> None:
    scope, units = await populate(api, 17)
    body = {"filter": f"subProjectId=={scope}", "limit": 4, "sort": sort}
    seen = await walk(api, body)
    assert sorted(u["id"] for u in seen) == sorted(u["id"] for u in units)
    everything = await query(api, {**body, "limit": 1000})
    assert [u["id"] for u in seen] == [u["id"] for u in everything["data"]]


async def test_a_walk_is_not_disturbed_by_new_units(api: Api) -> None:
    scope, units = await populate(api, 12)
    body = {"filter": f"subProjectId=={scope}", "limit": 3}
    seen: list[str] = []
    cursor = None
    while True:
        page = await query(api, {**body, **({"cursor": cursor} if cursor else {})})
        seen += [u["id"] for u in page["data"]]
        await asyncio.gather(*(api.create_unit(subProjectId=scope) for _ in range(2)))
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen))
    assert {u["id"] for u in units} <= set(seen)


async def test_filter_search_and_projection(api: Api) -> None:
    scope = f"q-{uuid.uuid4().hex[:8]}"
    wanted = await api.create_unit(name="Lagoon Villa", subProjectId=scope, price=900)
    await api.create_unit(name="Lagoon Flat", subProjectId=scope, price=5000)
    result = await query(
        api,
        {
            "filter": f"subProjectId=={scope};price=lt=1000",
            "q": "lagoon",
            "fields": ["name", "price"],
        },
    )
    assert result == {
        "data": [{"id": wanted["id"], "name": "Lagoon Villa", "price": 900}],
        "nextCursor": None,
    }


async def test_aggregates_by_group(api: Api) -> None:
    scope, units = await populate(api, 12)
    result = await query(
        api,
        {
            "filter": f"subProjectId=={scope}",
            "groupBy": ["city"],
            "aggregates": {
                "n": {"fn": "count"},
                "avgPrice": {"fn": "avg", "field": "price"},
                "top": {"fn": "max", "field": "price"},
                "names": {"fn": "countDistinct", "field": "name"},
                "first": {"fn": "min", "field": "createdAt"},
            },
        },
    )
    rows = {row["city"]: row for row in result["data"]}
    assert [row["city"] for row in result["data"]] == ["Cairo", "Dubai", "Riyadh", None]
    for city, row in rows.items():
        members = [u for u in units if u["city"] == city]
        prices = [u["price"] for u in members if u["price"] is not None]
        assert row["n"] == len(members)
        assert row["avgPrice"] == pytest.approx(sum(prices) / len(prices))
        assert row["top"] == max(prices)
        assert row["names"] == len({u["name"] for u in members})
        assert row["first"] == min(u["createdAt"] for u in members)
    total = await query(
        api, {"filter": f"subProjectId=={scope}", "aggregates": {"n": {"fn": "count"}}}
    )
    assert total == {"data": [{"n": 12}]}
    by_state = await query(
        api,
        {
            "filter": f"subProjectId=={scope}",
            "groupBy": ["status", "availability"],
            "aggregates": {"n": {"fn": "count"}},
        },
    )
    assert by_state["data"] == [{"status": "draft", "availability": "available", "n": 12}]


async def test_policy_applies_to_queries(api: Api) -> None:
    scope, _ = await populate(api, 8)
    key = await api.create_key("units:read", policy="city==Dubai")
    result = await query(api, {"filter": f"subProjectId=={scope}", "limit": 100}, key=key)
    assert {u["city"] for u in result["data"]} == {"Dubai"}
    counted = await query(
        api, {"filter": f"subProjectId=={scope}", "aggregates": {"n": {"fn": "count"}}}, key=key
    )
    assert counted["data"] == [{"n": 2}]


@pytest.mark.parametrize(
    ("body", "status", "where"),
    [
        ({"filter": "city=="}, 400, "filter"),
        ({"filter": "colour==red"}, 400, "filter"),
        ({"limit": 0}, 422, "limit"),
        ({"limit": 1001}, 422, "limit"),
        ({"sort": [{"field": "colour"}]}, 422, "sort[0].field"),
        ({"fields": ["nope"]}, 422, "fields"),
        ({"groupBy": ["city"]}, 422, "groupBy"),
        ({"aggregates": {"s": {"fn": "sum", "field": "city"}}}, 422, "aggregates.s.field"),
        ({"aggregates": {"s": {"fn": "avg"}}}, 422, "aggregates.s.field"),
        ({"aggregates": {"bad alias": {"fn": "count"}}}, 422, "aggregates.bad alias"),
        ({"cursor": "nonsense"}, 400, "cursor"),
        ({"unknown": 1}, 422, "unknown"),
    ],
)
async def test_bad_queries(api: Api, body: dict[str, Any], status: int, where: str) -> None:
    response = await api.request("POST", "/api/v2/units/query", json=body)
    assert response.status_code == status, response.text
    problem = response.json()
    if status == 400:
        assert problem["parameter"] == where
    else:
        assert where in [error["field"] for error in problem["errors"]]


async def test_a_cursor_from_another_sort_is_400(api: Api) -> None:
    scope, _ = await populate(api, 5)
    page = await query(api, {"filter": f"subProjectId=={scope}", "limit": 2})
    response = await api.request(
        "POST",
        "/api/v2/units/query",
        json={
            "filter": f"subProjectId=={scope}",
            "limit": 2,
            "cursor": page["nextCursor"],
            "sort": [{"field": "price"}],
        },
    )
    assert response.status_code == 400
