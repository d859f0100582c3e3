"""Single-unit operations over HTTP: create, retrieve, replace, patch, delete."""

from __future__ import annotations

import re
import uuid
from decimal import Decimal

import orjson
import pytest
from sqlalchemy import func, select

from tests.conftest import Api, unit_body
from units_api.events.tables import events
from units_api.units.schemas import EDITABLE_FIELDS
from units_api.units.tables import units

UUID7 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
ARRAYS = {"gallery", "specs", "options", "paymentPlans", "floorsPlan", "readings"}


async def test_create_answers_201_with_location_etag_and_the_whole_record(api: Api) -> None:
    response = await api.request("POST", "/api/v2/units/", json=unit_body(price=1500000))
    assert response.status_code == 201
    unit = response.json()
    assert UUID7.match(unit["id"])
    assert response.headers["location"].rstrip("/").endswith(f"/api/v2/units/{unit['id']}")
    assert response.headers["etag"] == '"1"'
    assert unit["version"] == 1
    assert TIME.match(unit["createdAt"]) and unit["createdAt"] == unit["updatedAt"]
    for field in EDITABLE_FIELDS:
        assert field in unit
        if field in ARRAYS:
            assert unit[field] == [] or field in unit_body()
    assert unit["location"] is None and unit["unitLocation"] is None
    assert unit["publishing"] == {
        "status": "draft",
        "publishedAt": None,
        "scheduledAt": None,
        "channels": [],
    }
    assert unit["availability"]["status"] == "available"
    assert unit["availability"]["reservedUntil"] is None


async def test_money_round_trips_exactly(api: Api) -> None:
    raw = (
        b'{"name":"N","type":"office","price":1234567.89,"surface":0.1,'
        b'"guaranty":999999999999999.99,"startingPrice":1.50,"maxPrice":1e3}'
    )
    response = await api.request(
        "POST", "/api/v2/units/", content=raw, headers={"content-type": "application/json"}
    )
    assert response.status_code == 201
    assert b'"price":1234567.89' in response.content
    assert b'"guaranty":999999999999999.99' in response.content
    assert b'"surface":0.1' in response.content
    got = await api.request("GET", f"/api/v2/units/{response.json()['id']}")
    parsed = orjson.loads(got.content)
    assert b'"guaranty":999999999999999.99' in got.content
    assert Decimal(str(parsed["startingPrice"])) == Decimal("1.5")


async def test_retrieve_with_and_without_trailing_slash_and_304(api: Api) -> None:
    unit = await api.create_unit()
    for path in (f"/api/v2/units/{unit['id']}", f"/api/v2/units/{unit['id']}/"):
        response = await api.request("GET", path)
        assert response.status_code == 200
        assert response.json() == unit
        assert response.headers["etag"] == '"1"'
    cached = await api.request(
        "GET", f"/api/v2/units/{unit['id']}", headers={"If-None-Match": '"1"'}
    )
    assert cached.status_code == 304 and cached.content == b""
    stale = await api.request(
        "GET", f"/api/v2/units/{unit['id']}", headers={"If-None-Match": '"9"'}
    )
    assert stale.status_code == 200


async def test_unknown_or_malformed_ids_are_404(api: Api) -> None:
    for unit_id in ("not-a-uuid", "01a20116-f7fc-74e7-86f8-34e3375af820", "1' OR '1'='1"):
        response = await api.request("GET", f"/api/v2/units/{unit_id}")
        assert response.status_code == 404
        assert response.headers["content-type"] == "application/problem+json"


async def test_put_replaces_every_editable_field(api: Api) -> None:
    unit = await api.create_unit(price=100, location="Zone 1", gallery=["https://x.test/a.jpg"])
    response = await api.request(
        "PUT", f"/api/v2/units/{unit['id']}/", json={"name": "Renamed", "type": "apartment"}
    )
    assert response.status_code == 200
    replaced = response.json()
    assert replaced["name"] == "Renamed" and replaced["type"] == "apartment"
    assert replaced["price"] is None and replaced["location"] is None and replaced["city"] is None
    assert replaced["gallery"] == []
    assert replaced["version"] == 2 and response.headers["etag"] == '"2"'
    assert replaced["createdAt"] == unit["createdAt"]
    assert replaced["updatedAt"] >= unit["updatedAt"]


async def test_get_edit_put_round_trip_ignores_server_fields(api: Api) -> None:
    unit = await api.create_unit(price=10)
    edited = {**unit, "price": 20, "version": 99, "createdAt": "1999-01-01T00:00:00.000Z"}
    response = await api.request("PUT", f"/api/v2/units/{unit['id']}", json=edited)
    assert response.status_code == 200
    assert response.json()["price"] == 20
    assert response.json()["version"] == 2
    assert response.json()["createdAt"] == unit["createdAt"]


async def test_create_ignores_a_client_id(api: Api) -> None:
    chosen = "01a20116-f7fc-74e7-86f8-34e3375af820"
    response = await api.request("POST", "/api/v2/units", json=unit_body(id=chosen))
    assert response.status_code == 201
    assert response.json()["id"] != chosen


async def test_put_or_patch_with_another_id_is_422(api: Api) -> None:
    unit = await api.create_unit()
    other = "01a20116-f7fc-74e7-86f8-34e3375af820"
    for method in ("PUT", "PATCH"):
        response = await api.request(
            method, f"/api/v2/units/{unit['id']}", json=unit_body(id=other)
        )
        assert response.status_code == 422
        assert response.json()["errors"][0]["field"] == "id"


async def test_patch_is_a_json_merge_patch(api: Api) -> None:
    unit = await api.create_unit(
        price=100,
        unitDesc="old",
        unitLocation={"type": "Point", "coordinates": [31.2, 30.0]},
        expense={"name": "maintenance", "value": 10},
        gallery=["https://x.test/1.jpg", "https://x.test/2.jpg"],
    )
    patch = {
        "unitDesc": None,
        "expense": {"value": 12},
        "gallery": ["https://x.test/3.jpg"],
        "unitLocation": {"coordinates": [31.5, 30.1]},
    }
    response = await api.request(
        "PATCH",
        f"/api/v2/units/{unit['id']}",
        json=patch,
        headers={"content-type": "application/merge-patch+json"},
    )
    assert response.status_code == 200, response.text
    patched = response.json()
    assert patched["unitDesc"] is None
    assert patched["price"] == 100
    assert patched["expense"] == {"name": "maintenance", "value": 12}
    assert patched["gallery"] == ["https://x.test/3.jpg"]
    assert patched["unitLocation"] == {"type": "Point", "coordinates": [31.5, 30.1]}
    assert patched["version"] == 2


async def test_patch_that_changes_nothing_keeps_the_version(api: Api) -> None:
    unit = await api.create_unit(price=100)
    response = await api.request("PATCH", f"/api/v2/units/{unit['id']}", json={"price": 100})
    assert response.status_code == 200
    assert response.json()["version"] == 1


async def test_patch_result_is_validated_as_a_whole(api: Api) -> None:
    unit = await api.create_unit(startingPrice=100, maxPrice=200)
    response = await api.request(
        "PATCH", f"/api/v2/units/{unit['id']}", json={"startingPrice": 300, "name": None}
    )
    assert response.status_code == 422
    fields = {error["field"] for error in response.json()["errors"]}
    assert fields == {"startingPrice", "name"}
    unchanged = await api.request("GET", f"/api/v2/units/{unit['id']}")
    assert unchanged.json()["version"] == 1


async def test_if_match_guards_every_write(api: Api) -> None:
    unit = await api.create_unit()
    path = f"/api/v2/units/{unit['id']}"
    stale = {"If-Match": '"7"'}
    assert (await api.request("PUT", path, json=unit_body(), headers=stale)).status_code == 412
    assert (await api.request("PATCH", path, json={"price": 1}, headers=stale)).status_code == 412
    assert (await api.request("DELETE", path, headers=stale)).status_code == 412
    ok = await api.request("PATCH", path, json={"price": 1}, headers={"If-Match": '"1"'})
    assert ok.status_code == 200 and ok.headers["etag"] == '"2"'
    assert (
        await api.request("PATCH", path, json={"price": 2}, headers={"If-Match": '"1"'})
    ).status_code == 412
    assert (await api.request("DELETE", path, headers={"If-Match": '"2"'})).status_code == 204


MALFORMED_IF_MATCH = ("", " ", "3", '"3', "W/3", '"3" "4"', '*, "3"', "**", "'3'")


@pytest.mark.parametrize("value", MALFORMED_IF_MATCH)
async def test_an_if_match_that_is_no_entity_tag_list_is_400_on_every_write(
    api: Api, value: str
) -> None:
    unit = await api.create_unit()
    path = f"/api/v2/units/{unit['id']}"
    writes = (
        ("PUT", path, unit_body()),
        ("PATCH", path, {"price": 1}),
        ("DELETE", path, None),
        ("PUT", f"/api/v2/units/publishing-actions/{unit['id']}", {"action": "archive"}),
        ("PUT", f"/api/v2/units/availability-actions/{unit['id']}", {"action": "block"}),
    )
    for method, url, body in writes:
        response = await api.request(method, url, json=body, headers={"If-Match": value})
        assert response.status_code == 400, (method, url, response.text)
        assert response.headers["content-type"] == "application/problem+json"
        problem = response.json()
        assert problem["type"] == "/problems/invalid-header"
        assert problem["header"] == "If-Match"
    after = await api.request("GET", path)
    assert after.json()["version"] == 1


async def test_star_and_entity_tag_lists_match_as_before(api: Api) -> None:
    unit = await api.create_unit()
    path = f"/api/v2/units/{unit['id']}"
    for version, value in enumerate(('"1"', ' W/"2" ', '"9", "3"', "*", ',"5",'), start=1):
        response = await api.request(
            "PATCH", path, json={"price": version}, headers={"If-Match": value}
        )
        assert response.status_code == 200, (value, response.text)
        assert response.headers["etag"] == f'"{version + 1}"'
    stale = await api.request("PATCH", path, json={"price": 0}, headers={"If-Match": '"1", W/"2"'})
    assert stale.status_code == 412


async def test_delete_then_404_everywhere_and_history_remains(api: Api) -> None:
    unit = await api.create_unit(price=5)
    path = f"/api/v2/units/{unit['id']}"
    response = await api.request("DELETE", path)
    assert response.status_code == 204 and response.content == b""
    assert (await api.request("GET", path)).status_code == 404
    assert (await api.request("PATCH", path, json={"price": 1})).status_code == 404
    assert (await api.request("PUT", path, json=unit_body())).status_code == 404
    assert (await api.request("DELETE", path)).status_code == 404
    history = await api.request("GET", f"{path}/history")
    assert history.status_code == 200
    assert [entry["action"] for entry in history.json()["data"]] == ["delete", "create"]


async def test_every_write_records_history_and_an_event(api: Api) -> None:
    unit = await api.create_unit(price=100)
    path = f"/api/v2/units/{unit['id']}"
    await api.request("PATCH", path, json={"price": 150})
    await api.request("PUT", path, json=unit_body(price=175))
    await api.request("DELETE", path)
    history = (await api.request("GET", f"{path}/history")).json()["data"]
    assert [(e["version"], e["action"]) for e in history] == [
        (4, "delete"),
        (3, "replace"),
        (2, "patch"),
        (1, "create"),
    ]
    assert history[2]["changes"]["price"] == {"from": 100, "to": 150}
    assert history[1]["changes"]["price"] == {"from": 150, "to": 175}
    assert history[0]["actor"]["type"] == "apiKey"
    async with api.context.db.read() as conn:
        rows = (
            await conn.execute(
                select(events.c.type, events.c.version)
                .where(events.c.unit_id == uuid.UUID(unit["id"]))
                .order_by(events.c.seq)
            )
        ).all()
    assert [tuple(row) for row in rows] == [
        ("unit.created", 1),
        ("unit.updated", 2),
        ("unit.updated", 3),
        ("unit.deleted", 4),
    ]


async def test_history_pages_with_cursor_and_rejects_bad_paging(api: Api) -> None:
    unit = await api.create_unit(price=0)
    path = f"/api/v2/units/{unit['id']}"
    for price in range(1, 6):
        await api.request("PATCH", path, json={"price": price})
    seen: list[int] = []
    url = f"{path}/history?limit=2"
    while url:
        page = (await api.request("GET", url)).json()
        seen += [entry["version"] for entry in page["data"]]
        url = f"{path}/history?limit=2&cursor={page['nextCursor']}" if page["nextCursor"] else ""
    assert seen == [6, 5, 4, 3, 2, 1]
    for query in ("limit=0", "limit=201", "limit=abc", "cursor=%%%", "cursor=WyJ4Il0"):
        response = await api.request("GET", f"{path}/history?{query}")
        assert response.status_code == 400, query
    assert (await api.request("GET", "/api/v2/units/not-a-uuid/history")).status_code == 404


async def test_failed_write_leaves_no_trace(api: Api) -> None:
    async with api.context.db.read() as conn:
        before = (await conn.execute(select(func.count()).select_from(events))).scalar_one()
    response = await api.request("POST", "/api/v2/units/", json={"name": "x", "price": -1})
    assert response.status_code == 422
    async with api.context.db.read() as conn:
        after = (await conn.execute(select(func.count()).select_from(events))).scalar_one()
    assert after == before


async def test_the_number_columns_hold_the_exact_numbers(pg_api: Api) -> None:
    """Filters and sorts read the columns: a single write (one row of parameters) and a bulk
    one (arrays) store the numbers exactly, as the record shows them."""
    raw = (
        b'{"name":"N","type":"office","price":999999999999999.12345678901234567890,'
        b'"surface":0.1,"maxPrice":1e3,"startingPrice":0}'
    )
    created = await pg_api.request(
        "POST", "/api/v2/units/", content=raw, headers={"content-type": "application/json"}
    )
    assert created.status_code == 201, created.text
    unit_id = uuid.UUID(created.json()["id"])

    async def columns() -> tuple[Decimal, ...]:
        async with pg_api.context.db.read() as conn:
            query = select(
                units.c.price, units.c.surface, units.c.max_price, units.c.starting_price
            ).where(units.c.id == unit_id)
            return tuple((await conn.execute(query)).one())

    assert await columns() == (
        Decimal("999999999999999.12345678901234567890"),
        Decimal("0.1"),
        Decimal("1000"),
        Decimal("0"),
    )
    patched = await pg_api.request(
        "PATCH",
        f"/api/v2/units/{unit_id}",
        content=b'{"surface":12.5e-3}',
        headers={"content-type": "application/merge-patch+json"},
    )
    assert patched.status_code == 200, patched.text
    assert (await columns())[1] == Decimal("0.0125")
    other = await pg_api.create_unit(price=1)
    bulk = await pg_api.request(
        "PUT",
        "/api/v2/units/bulk/update",
        content=b'{"units":[{"id":"%s","price":0.00000000000000000001},'
        b'{"id":"%s","price":2}],"atomic":true}' % (str(unit_id).encode(), other["id"].encode()),
        headers={"content-type": "application/json"},
    )
    assert bulk.status_code == 200, bulk.text
    assert (await columns())[0] == Decimal("1E-20")
    found = await pg_api.request("GET", "/api/v2/units/", params={"p": "price==1e-20"})
    assert [unit["id"] for unit in found.json()["data"]] == [str(unit_id)]
