"""The unit list: paging, sorting, projection, counting, links, and bad parameters."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from sqlalchemy import func, select

from tests.conftest import Api
from units_api.units.tables import units


async def make_units(api: Api, prices: list[int | None]) -> tuple[str, list[dict[str, Any]]]:
    scope = f"sp-{uuid.uuid4().hex[:10]}"
    created = [
        await api.create_unit(name=f"Unit {i:02d}", subProjectId=scope, price=price)
        for i, price in enumerate(prices)
    ]
    return scope, created


async def get_list(api: Api, scope: str, query: str = "", **headers: str) -> Any:
    response = await api.request(
        "GET", f"/api/v2/units/?p=subProjectId=={scope}&{query}", headers=headers
    )
    assert response.status_code == 200, response.text
    return response


async def test_default_is_most_recent_first_with_envelope_and_links(api: Api) -> None:
    scope, created = await make_units(api, [1, 2, 3, 4, 5])
    response = await get_list(api, scope, "limit=2")
    body = response.json()
    assert [u["id"] for u in body["data"]] == [created[4]["id"], created[3]["id"]]
    assert body["data"][0] == created[4]
    assert body["meta"] == {"page": 1, "limit": 2, "total": 5, "totalPages": 3, "count": "exact"}
    links = body["links"]
    assert links["prev"] is None and "page=2" in links["next"] and "page=3" in links["last"]
    header = response.headers["link"]
    assert re.search(r'<[^>]+page=2[^>]*>; rel="next"', header)
    assert 'rel="prev"' not in header
    last = (await get_list(api, scope, "limit=2&page=3")).json()
    assert [u["id"] for u in last["data"]] == [created[0]["id"]]
    assert last["links"]["next"] is None and "page=2" in last["links"]["prev"]


async def test_paging_visits_every_unit_exactly_once(api: Api) -> None:
    scope, created = await make_units(api, [7] * 7)
    seen: list[str] = []
    for page in range(1, 5):
        seen += [
            u["id"] for u in (await get_list(api, scope, f"limit=2&page={page}")).json()["data"]
        ]
    assert sorted(seen) == sorted(u["id"] for u in created) and len(seen) == 7


async def test_sort_by_price_with_nulls_last_and_id_ties(api: Api) -> None:
    scope, _ = await make_units(api, [30, None, 10, 20, 10])
    ascending = (await get_list(api, scope, "sortBy=price&order=asc")).json()["data"]
    assert [u["price"] for u in ascending] == [10, 10, 20, 30, None]
    tied = [u["id"] for u in ascending[:2]]
    assert tied == sorted(tied)
    descending = (await get_list(api, scope, "sortBy=price&order=desc")).json()["data"]
    assert [u["price"] for u in descending] == [30, 20, 10, 10, None]
    both = (await get_list(api, scope, "sortBy=price,name&order=asc,desc")).json()["data"]
    assert [u["name"] for u in both[:2]] == ["Unit 04", "Unit 02"]


async def test_fields_projection_always_keeps_id(api: Api) -> None:
    scope, _ = await make_units(api, [1234567.89])  # type: ignore[list-item]
    response = await get_list(api, scope, "fields=price,city")
    assert response.json()["data"] == [
        {"id": response.json()["data"][0]["id"], "price": 1234567.89, "city": "New Cairo"}
    ]
    assert b'"price":1234567.89' in response.content
    nested = await get_list(api, scope, "fields=publishing,unitLocation,paymentPlans")
    whole = (await get_list(api, scope, "")).json()["data"][0]
    assert nested.json()["data"] == [
        {name: whole[name] for name in ("id", "publishing", "unitLocation", "paymentPlans")}
    ]


async def test_count_modes(api: Api) -> None:
    scope, _ = await make_units(api, [1, 2, 3])
    none = (await get_list(api, scope, "limit=2", Prefer="count=none")).json()
    assert none["meta"]["total"] is None and none["meta"]["totalPages"] is None
    assert none["meta"]["count"] == "none" and none["links"]["last"] is None
    assert none["links"]["next"] is not None
    estimated = (await get_list(api, scope, "limit=2", Prefer="count=estimated")).json()
    expected = "estimated" if api.context.db.dialect == "postgresql" else "exact"
    assert estimated["meta"]["count"] == expected
    assert isinstance(estimated["meta"]["total"], int)


async def test_an_estimated_count_of_a_list_of_values(api: Api) -> None:
    scope, created = await make_units(api, [1, 2, 3])
    ids = ",".join(unit["id"] for unit in created[:2])
    query = f"p=subProjectId=={scope};id=in=({ids})&limit=1"
    answer = await api.request(
        "GET", f"/api/v2/units/?{query}", headers={"prefer": "count=estimated"}
    )
    assert answer.status_code == 200, answer.text
    assert len(answer.json()["data"]) == 1 and isinstance(answer.json()["meta"]["total"], int)


@pytest.mark.parametrize(
    ("query", "parameter"),
    [
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("limit=x", "limit"),
        ("page=0", "page"),
        ("page=-1", "page"),
        ("page=501&limit=20", "page"),
        ("sortBy=colour", "sortBy"),
        ("sortBy=price,price", "sortBy"),
        ("order=up", "order"),
        ("sortBy=price,name&order=asc,desc,asc", "order"),
        ("fields=price,nope", "fields"),
        ("p=city==", "p"),
        ("p=nope==1", "p"),
        ("p=price=gt=cheap", "p"),
        ("p=" + "(" * 40 + "price==1" + ")" * 40, "p"),
    ],
)
async def test_bad_parameters_are_400_naming_them(api: Api, query: str, parameter: str) -> None:
    response = await api.request("GET", f"/api/v2/units/?{query}")
    assert response.status_code == 400, response.text
    problem = response.json()
    assert problem["parameter"] == parameter
    assert response.headers["content-type"] == "application/problem+json"


async def test_deep_pages_point_to_the_query_endpoint(api: Api) -> None:
    response = await api.request("GET", "/api/v2/units/?limit=100&page=101")
    assert response.status_code == 400
    assert "/api/v2/units/query" in response.json()["detail"]
    assert (await api.request("GET", "/api/v2/units/?limit=100&page=100")).status_code == 200


async def test_hostile_filters_are_400_never_500(api: Api) -> None:
    for hostile in (
        "name=='; DROP TABLE units; --",
        "price=in=(" + ",".join(["1"] * 600) + ")",
        "a" * 5000,
        "name==\x00",
        "id==not-a-uuid",
        "createdAt=gt=yesterday",
    ):
        response = await api.request("GET", "/api/v2/units/", params={"p": hostile})
        assert response.status_code in (200, 400), (hostile, response.text)
    survivors = await api.request("GET", "/api/v2/units/?limit=1")
    assert survivors.status_code == 200


async def test_unfiltered_total_is_exact_through_creates_and_deletes(api: Api) -> None:
    async def total() -> int:
        response = await api.request("GET", "/api/v2/units/?limit=1")
        value: int = response.json()["meta"]["total"]
        return value

    async with api.context.db.read() as conn:
        counted = (await conn.execute(select(func.count()).select_from(units))).scalar_one()
    before = await total()
    assert before == counted
    unit = await api.create_unit()
    assert await total() == before + 1
    await api.request("DELETE", f"/api/v2/units/{unit['id']}")
    assert await total() == before
