"""Validation rules of the contract: each violation listed, with its path, in one 422."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Api, start_api, unit_body
from units_api.config import Settings


def fields_of(response: Any) -> dict[str, str]:
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    return {error["field"]: error["message"] for error in response.json()["errors"]}


async def test_every_violation_is_listed_with_its_path(api: Api) -> None:
    body = {
        "name": "  ",
        "price": "100",
        "surface": True,
        "notes": "typo of Notes",
        "startingPrice": 10,
        "maxPrice": 5,
        "unitImageUrl": "ftp://example.com/a.jpg",
        "gallery": ["not a url"],
        "unitLocation": {"type": "Point", "coordinates": [181, -91]},
        "paymentPlans": [
            {"minPrice": 5, "maxPrice": 3, "default": True},
            {"default": True, "downPayment": -1},
        ],
        "floorsPlan": [{"rooms": 2.5, "baths": -1}],
        "readings": [{"readingDate": "2026-02-30", "notes": "x"}],
        "specs": [{"active": "yes"}],
    }
    errors = fields_of(await api.request("POST", "/api/v2/units/", json=body))
    assert set(errors) == {
        "name",
        "type",
        "price",
        "surface",
        "notes",
        "startingPrice",
        "unitImageUrl",
        "gallery[0]",
        "unitLocation.coordinates[0]",
        "unitLocation.coordinates[1]",
        "paymentPlans[0].minPrice",
        "paymentPlans[1].default",
        "paymentPlans[1].downPayment",
        "floorsPlan[0].rooms",
        "floorsPlan[0].baths",
        "readings[0].readingDate",
        "readings[0].notes",
        "specs[0].active",
    }
    assert errors["notes"] == "unknown field"
    assert errors["type"] == "is required"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("name", "x" * 201),
        ("city", "x" * 501),
        ("unitDesc", "x" * 20_001),
        ("gallery", ["https://x.test/a.jpg"] * 101),
        ("specs", [{}] * 201),
        ("readings", [{}] * 1001),
    ],
)
async def test_size_limits_per_field(api: Api, field: str, value: Any) -> None:
    errors = fields_of(
        await api.request("POST", "/api/v2/units/", json=unit_body(**{field: value}))
    )
    assert field in errors


async def test_values_just_inside_the_limits_are_accepted(api: Api) -> None:
    body = unit_body(
        name="n" * 200,
        unitDesc="d" * 20_000,
        readings=[{"service": "water"}] * 1000,
        floorsPlan=[{"rooms": 3.0, "baths": 0}],
        price=0,
        readings_dates=None,
    )
    body.pop("readings_dates")
    response = await api.request("POST", "/api/v2/units/", json=body)
    assert response.status_code == 201, response.text
    assert response.json()["floorsPlan"][0]["rooms"] == 3


@pytest.mark.parametrize(
    "date", ["2026-11-22", "2026-11-22T09:30:00Z", "2026-11-22T09:30:00.5+02:00"]
)
async def test_reading_date_comes_back_as_sent(api: Api, date: str) -> None:
    unit = await api.create_unit(readings=[{"readingDate": date, "Notes": "ok"}])
    assert unit["readings"][0]["readingDate"] == date
    assert unit["readings"][0]["Notes"] == "ok"


async def test_body_that_is_not_an_object_is_422(api: Api) -> None:
    for body in ([1, 2], "text", 3):
        response = await api.request("POST", "/api/v2/units/", json=body)
        assert response.status_code == 422


async def test_nan_and_infinity_are_not_json(api: Api) -> None:
    for raw in (
        b'{"name":"a","type":"b","price":NaN}',
        b'{"name":"a","type":"b","price":Infinity}',
    ):
        response = await api.request(
            "POST", "/api/v2/units/", content=raw, headers={"content-type": "application/json"}
        )
        assert response.status_code == 400


async def test_body_over_one_mebibyte_is_413(api: Api) -> None:
    body = unit_body(unitDesc="x" * (1024 * 1024))
    response = await api.request("POST", "/api/v2/units/", json=body)
    assert response.status_code == 413
    assert response.headers["content-type"] == "application/problem+json"


async def test_configured_vocabularies_name_the_allowed_values(database_url: str) -> None:
    settings = Settings(
        database_url=database_url,
        access_log=False,
        vocab_type="villa,apartment",
        vocab_uom="m2,sqft",
    )
    async for api in start_api(settings):
        ok = await api.request("POST", "/api/v2/units/", json=unit_body(type="apartment"))
        assert ok.status_code == 201
        bad = await api.request(
            "POST",
            "/api/v2/units/",
            json=unit_body(
                type="castle", options=[{"uom": "acre"}], floorsPlan=[{"uom": "m2"}, {"uom": "ft"}]
            ),
        )
        errors = fields_of(bad)
        assert errors["type"] == "must be one of: villa, apartment"
        assert set(errors) == {"type", "options[0].uom", "floorsPlan[1].uom"}


async def test_numbers_out_of_range_are_422_not_500(api: Api) -> None:
    raw = (
        b'{"name":"a","type":"b","price":1e16,"surface":1e-25,'
        b'"floorsPlan":[{"baths":20424841523084500992}],"guaranty":1E+400}'
    )
    response = await api.request(
        "POST", "/api/v2/units/", content=raw, headers={"content-type": "application/json"}
    )
    assert set(fields_of(response)) == {"price", "surface", "floorsPlan[0].baths", "guaranty"}


async def test_nul_characters_are_422_not_500(api: Api) -> None:
    body = unit_body(
        name="a\u0000b",
        unitDesc="x\u0000",
        gallery=["https://x.test/\u0000"],
        readings=[{"Notes": "\u0000"}],
    )
    errors = fields_of(await api.request("POST", "/api/v2/units/", json=body))
    assert set(errors) == {"name", "unitDesc", "gallery[0]", "readings[0].Notes"}
