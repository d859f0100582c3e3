"""A unit's list sent as null is the same as []: on create, PUT, PATCH and bulk items alike,
and the OpenAPI document says so (for what is sent; a returned unit always has its lists)."""

from __future__ import annotations

from typing import Any

from tests.conftest import Api, unit_body
from units_api.units.schemas import EDITABLE_FIELDS, UnitFields

LISTS = [
    name
    for name in EDITABLE_FIELDS
    if getattr(UnitFields.model_fields[name].annotation, "__origin__", None) is list
]
FILLED: dict[str, Any] = {
    "gallery": ["https://cdn.example.com/1.jpg"],
    "specs": [{"featureTag": "pool"}],
    "options": [{"optionName": "roof"}],
    "paymentPlans": [{"planName": "cash"}],
    "floorsPlan": [{"rooms": 3}],
    "readings": [{"service": "water", "cost": 10}],
}


def test_every_list_is_covered() -> None:
    assert sorted(LISTS) == sorted(FILLED)


async def test_null_lists_are_empty_on_create_and_put(api: Api) -> None:
    response = await api.request("POST", "/api/v2/units/", json=unit_body(**dict.fromkeys(LISTS)))
    assert response.status_code == 201, response.text
    unit = response.json()
    assert all(unit[name] == [] for name in LISTS)
    path = f"/api/v2/units/{unit['id']}/"
    filled = await api.request("PUT", path, json=unit_body(**FILLED))
    assert all(len(filled.json()[name]) == 1 for name in LISTS)
    emptied = await api.request("PUT", path, json=unit_body(**dict.fromkeys(LISTS)))
    assert emptied.status_code == 200, emptied.text
    assert all(emptied.json()[name] == [] for name in LISTS)


async def test_null_clears_lists_in_patch_and_bulk_items(api: Api) -> None:
    first = await api.create_unit(**FILLED)
    second = await api.create_unit(**FILLED)
    patched = await api.request("PATCH", f"/api/v2/units/{first['id']}/", json=dict.fromkeys(LISTS))
    assert patched.status_code == 200, patched.text
    assert all(patched.json()[name] == [] for name in LISTS)
    bulk = await api.request(
        "PUT",
        "/api/v2/units/bulk/update",
        json={"units": [{"id": second["id"], **dict.fromkeys(LISTS)}]},
    )
    assert bulk.status_code == 200, bulk.text
    after = (await api.request("GET", f"/api/v2/units/{second['id']}/")).json()
    assert all(after[name] == [] for name in LISTS)


async def test_the_document_takes_null_lists_and_returns_lists(api: Api) -> None:
    schemas = (await api.client.get("/openapi.json")).json()["components"]["schemas"]
    for name in LISTS:
        for model in ("UnitWrite", "UnitPatch"):
            options = schemas[model]["properties"][name]["anyOf"]
            assert [option["type"] for option in options] == ["array", "null"], (model, name)
        assert schemas["UnitRead"]["properties"][name]["type"] == "array"
