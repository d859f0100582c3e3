"""The listing fields (currency, country, offeringType, bedrooms, bathrooms, completionStatus,
handoverDate) on both databases: null when unset, every bad value a 422 with its path, each a
filter selector, a sort key and a group, and the server's default currency checked."""

from __future__ import annotations

import string
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from tests.conftest import Api
from units_api.codes import COUNTRIES, CURRENCIES
from units_api.config import Settings
from units_api.errors import ValidationFailed
from units_api.units.validation import validate_unit

LISTING = {
    "currency": "AED",
    "country": "AE",
    "offeringType": "rent",
    "bedrooms": 0,
    "bathrooms": 1,
    "completionStatus": "offPlan",
    "handoverDate": "2028-06-30",
}
UNITS = "/api/v2/units/"


def paths_of(response: Any) -> dict[str, str]:
    assert response.status_code == 422, response.text
    return {error["field"]: error["message"] for error in response.json()["errors"]}


async def test_the_fields_come_back_as_sent_and_null_when_unset(api: Api) -> None:
    bare = await api.create_unit(name="Bare")
    assert {name: bare[name] for name in LISTING} == dict.fromkeys(LISTING)
    unit = await api.create_unit(name="Listed", **LISTING)
    assert {name: unit[name] for name in LISTING} == LISTING
    again = await api.request("GET", f"{UNITS}{unit['id']}")
    assert {name: again.json()[name] for name in LISTING} == LISTING


BAD_VALUES = [
    ("currency", "egp"),
    ("currency", "EURO"),
    ("currency", "ABC"),
    ("currency", 818),
    ("country", "eg"),
    ("country", "EGY"),
    ("country", "XX"),
    ("offeringType", "lease"),
    ("offeringType", "Sale"),
    ("bedrooms", 1.5),
    ("bedrooms", -1),
    ("bedrooms", "3"),
    ("bathrooms", True),
    ("bathrooms", -2),
    ("completionStatus", "done"),
    ("completionStatus", "offplan"),
]


@pytest.mark.parametrize(("field", "value"), BAD_VALUES)
async def test_a_bad_value_is_a_422_naming_its_field(api: Api, field: str, value: Any) -> None:
    body = {"name": "Bad", "type": "villa", field: value}
    assert set(paths_of(await api.request("POST", UNITS, json=body))) == {field}


@pytest.mark.parametrize("value", ["2028-02-30", "28-06-30", "2028-W01-1", "2028-06-30T00:00:00Z"])
async def test_a_handover_date_is_a_calendar_date(api: Api, value: str) -> None:
    body = {"name": "Bad", "type": "villa", "completionStatus": "offPlan", "handoverDate": value}
    assert set(paths_of(await api.request("POST", UNITS, json=body))) == {"handoverDate"}


@pytest.mark.parametrize("status", [None, "ready"])
async def test_a_handover_date_needs_an_off_plan_unit(api: Api, status: str | None) -> None:
    body = {"name": "Early", "type": "villa", "completionStatus": status}
    body["handoverDate"] = "2028-06-30"
    errors = paths_of(await api.request("POST", UNITS, json=body))
    assert set(errors) == {"handoverDate"} and "offPlan" in errors["handoverDate"]


async def test_a_patch_that_makes_an_off_plan_unit_ready_must_clear_its_date(api: Api) -> None:
    unit = await api.create_unit(
        name="Handed", completionStatus="offPlan", handoverDate="2027-03-01"
    )
    path = f"{UNITS}{unit['id']}"
    refused = await api.request("PATCH", path, json={"completionStatus": "ready"})
    assert set(paths_of(refused)) == {"handoverDate"}
    done = await api.request(
        "PATCH", path, json={"completionStatus": "ready", "handoverDate": None}
    )
    assert done.status_code == 200, done.text
    assert (done.json()["completionStatus"], done.json()["handoverDate"]) == ("ready", None)


@given(st.text(alphabet=string.ascii_letters, min_size=1, max_size=4))
@settings(max_examples=300)
def test_a_currency_is_accepted_exactly_when_iso_4217_lists_it(code: str) -> None:
    assert _accepted({"currency": code}) == (code in CURRENCIES)


@given(st.text(alphabet=string.ascii_letters, min_size=1, max_size=3))
@settings(max_examples=300)
def test_a_country_is_accepted_exactly_when_iso_3166_lists_it(code: str) -> None:
    assert _accepted({"country": code}) == (code in COUNTRIES)


@given(st.integers(-5, 50) | st.decimals(-5, 50, places=1) | st.booleans() | st.none())
@settings(max_examples=200)
def test_bedrooms_are_whole_numbers_from_zero(value: Any) -> None:
    whole = value is None or (not isinstance(value, bool) and value >= 0 and value == int(value))
    assert _accepted({"bedrooms": value, "bathrooms": value}) == whole


@given(st.dates(), st.sampled_from([None, "ready", "offPlan"]))
@settings(max_examples=200)
def test_any_date_goes_with_an_off_plan_unit_alone(day: Any, status: str | None) -> None:
    body = {"completionStatus": status, "handoverDate": day.isoformat()}
    assert _accepted(body) == (status == "offPlan")


def _accepted(fields: dict[str, Any]) -> bool:
    try:
        validate_unit({"name": "u", "type": "villa", **fields})
    except ValidationFailed:
        return False
    return True


def test_the_default_currency_is_an_iso_4217_code() -> None:
    assert Settings(default_currency="SAR").default_currency == "SAR"
    for bad in ("egp", "EURO", "ABC"):
        with pytest.raises(ValidationError, match="ISO 4217"):
            Settings(default_currency=bad)


async def _scope(api: Api) -> tuple[str, dict[str, str]]:
    """Five units of a project of their own, by name."""
    scope = f"lf-{uuid.uuid4().hex[:8]}"
    bodies: dict[str, dict[str, Any]] = {
        "cairo-flat": {
            "currency": "EGP",
            "country": "EG",
            "offeringType": "sale",
            "bedrooms": 2,
            "bathrooms": 1,
            "completionStatus": "ready",
        },
        "cairo-villa": {
            "currency": "EGP",
            "country": "EG",
            "offeringType": "sale",
            "bedrooms": 5,
            "bathrooms": 4,
            "completionStatus": "offPlan",
            "handoverDate": "2029-12-01",
        },
        "dubai-studio": {
            "currency": "AED",
            "country": "AE",
            "offeringType": "rent",
            "bedrooms": 0,
            "bathrooms": 1,
            "completionStatus": "ready",
        },
        "riyadh-villa": {
            "currency": "SAR",
            "country": "SA",
            "offeringType": "sale",
            "bedrooms": 4,
            "bathrooms": 5,
            "completionStatus": "offPlan",
            "handoverDate": "2027-06-15",
        },
        "bare": {},
    }
    ids = {}
    for name, fields in bodies.items():
        ids[name] = (await api.create_unit(name=name, subProjectId=scope, **fields))["id"]
    return scope, ids


async def _names(api: Api, scope: str, **params: str) -> list[str]:
    params["p"] = f"subProjectId=={scope}" + (f";{params['p']}" if "p" in params else "")
    response = await api.request("GET", UNITS, params={"fields": "name", "limit": "50", **params})
    assert response.status_code == 200, response.text
    return [unit["name"] for unit in response.json()["data"]]


FILTERS = [
    ("currency==EGP", {"cairo-flat", "cairo-villa"}),
    ("currency==aed", {"dubai-studio"}),  # text matches whatever its case
    ("currency=null=true", {"bare"}),
    ("country=in=(AE,SA)", {"dubai-studio", "riyadh-villa"}),
    ("offeringType==rent", {"dubai-studio"}),
    ("offeringType!=rent", {"cairo-flat", "cairo-villa", "riyadh-villa", "bare"}),
    ("bedrooms==0", {"dubai-studio"}),
    ("bedrooms=ge=4", {"cairo-villa", "riyadh-villa"}),
    ("bathrooms=lt=2", {"cairo-flat", "dubai-studio"}),
    ("completionStatus==offPlan", {"cairo-villa", "riyadh-villa"}),
    ("handoverDate=lt=2028-01-01", {"riyadh-villa"}),
    ("handoverDate=null=false", {"cairo-villa", "riyadh-villa"}),
]


async def test_each_field_is_a_filter_selector(api: Api) -> None:
    scope, _ = await _scope(api)
    for text, expected in FILTERS:
        assert set(await _names(api, scope, p=text)) == expected, text
    for bad in ("bedrooms=ge=two", "bathrooms==1.5x"):
        response = await api.request("GET", UNITS, params={"p": bad})
        assert response.status_code == 400, bad


SORTS = [
    ("bedrooms", "asc", ["dubai-studio", "cairo-flat", "riyadh-villa", "cairo-villa", "bare"]),
    ("bathrooms", "desc", ["riyadh-villa", "cairo-villa", None, None, "bare"]),
    ("currency", "asc", ["dubai-studio", None, None, "riyadh-villa", "bare"]),
    ("country", "desc", ["riyadh-villa", None, None, "dubai-studio", "bare"]),
    ("handoverDate", "asc", ["riyadh-villa", "cairo-villa", None, None, None]),
    ("completionStatus", "asc", ["cairo-villa", "riyadh-villa", None, None, "bare"]),
    ("offeringType", "asc", ["dubai-studio", None, None, None, "bare"]),
]


@pytest.mark.parametrize(("field", "order", "expected"), SORTS)
async def test_each_field_is_a_sort_key_with_unset_values_last(
    api: Api, field: str, order: str, expected: list[str | None]
) -> None:
    scope, _ = await _scope(api)
    found = await _names(api, scope, sortBy=field, order=order)
    assert len(found) == len(expected)
    assert all(want is None or got == want for got, want in zip(found, expected, strict=True))


async def test_the_query_sorts_by_bedrooms_page_by_page(api: Api) -> None:
    scope, _ = await _scope(api)
    seen: list[str] = []
    cursor = None
    while True:
        body: dict[str, Any] = {
            "filter": f"subProjectId=={scope}",
            "sort": [{"field": "bedrooms", "order": "desc"}],
            "fields": ["name"],
            "limit": 2,
        }
        if cursor:
            body["cursor"] = cursor
        response = await api.request("POST", f"{UNITS}query", json=body)
        assert response.status_code == 200, response.text
        seen += [unit["name"] for unit in response.json()["data"]]
        cursor = response.json()["nextCursor"]
        if cursor is None:
            break
    assert seen == ["cairo-villa", "riyadh-villa", "cairo-flat", "dubai-studio", "bare"]


async def test_bedrooms_and_the_listing_fields_group_and_aggregate(api: Api) -> None:
    scope, _ = await _scope(api)
    body = {
        "filter": f"subProjectId=={scope};bedrooms=null=false",
        "groupBy": ["country", "offeringType"],
        "aggregates": {
            "n": {"fn": "count"},
            "beds": {"fn": "sum", "field": "bedrooms"},
            "most": {"fn": "max", "field": "bathrooms"},
        },
    }
    response = await api.request("POST", f"{UNITS}query", json=body)
    assert response.status_code == 200, response.text
    assert response.json()["data"] == [
        {"country": "AE", "offeringType": "rent", "n": 1, "beds": 0, "most": 1},
        {"country": "EG", "offeringType": "sale", "n": 2, "beds": 7, "most": 4},
        {"country": "SA", "offeringType": "sale", "n": 1, "beds": 4, "most": 5},
    ]
    by_bedrooms = {
        "filter": f"subProjectId=={scope}",
        "groupBy": ["bedrooms"],
        "aggregates": {"n": {"fn": "count"}, "avgBaths": {"fn": "avg", "field": "bathrooms"}},
    }
    response = await api.request("POST", f"{UNITS}query", json=by_bedrooms)
    assert response.status_code == 200, response.text
    groups = {row["bedrooms"]: (row["n"], row["avgBaths"]) for row in response.json()["data"]}
    assert groups == {0: (1, 1.0), 2: (1, 1.0), 4: (1, 5.0), 5: (1, 4.0), None: (1, None)}
