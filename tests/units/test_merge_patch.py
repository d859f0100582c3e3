"""JSON Merge Patch: the RFC 7396 examples, and PATCH over HTTP agreeing with it."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import Api, start_api
from units_api.config import Settings
from units_api.units.merge_patch import merge_patch
from units_api.units.schemas import EDITABLE_FIELDS

RFC_7396_EXAMPLES = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("target", "patch", "expected"), RFC_7396_EXAMPLES)
def test_rfc_7396_examples(target: Any, patch: Any, expected: Any) -> None:
    assert merge_patch(target, patch) == expected


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=10,
)


@given(target=json_values, patch=json_values)
def test_applying_a_patch_twice_changes_nothing_more(target: Any, patch: Any) -> None:
    once = merge_patch(target, patch)
    assert merge_patch(once, patch) == once


money = st.integers(min_value=0, max_value=10**9)
text = st.text(alphabet="abc شقة", min_size=1, max_size=8).filter(str.strip)
url = st.integers(0, 99).map(lambda n: f"https://cdn.example.com/{n}.jpg")
field_values: dict[str, st.SearchStrategy[Any]] = {
    "name": text,
    "location": text,
    "city": text,
    "unitNameAr": text,
    "unitDesc": text,
    "price": money,
    "surface": money,
    "guaranty": money,
    "unitImageUrl": url,
    "gallery": st.lists(url, max_size=3),
    "expense": st.fixed_dictionaries(
        {}, optional={"name": text | st.none(), "value": money | st.none()}
    ),
    "unitLocation": st.fixed_dictionaries(
        {},
        optional={"coordinates": st.tuples(st.integers(-180, 180), st.integers(-90, 90)).map(list)},
    ),
    "floorsPlan": st.lists(
        st.fixed_dictionaries({}, optional={"rooms": st.integers(0, 9), "view": text}), max_size=2
    ),
}
OPTIONAL = [name for name in field_values if name != "name"]
patches = st.fixed_dictionaries(
    {},
    optional={
        name: (strategy | st.none()) if name in OPTIONAL else strategy
        for name, strategy in field_values.items()
    },
)
START = {
    "name": "Start",
    "type": "villa",
    "price": 5,
    "expense": {"name": "fee", "value": 1},
    "unitLocation": {"type": "Point", "coordinates": [31, 30]},
    "gallery": ["https://cdn.example.com/0.jpg"],
}


def editable(record: dict[str, Any]) -> dict[str, Any]:
    return {name: record[name] for name in EDITABLE_FIELDS}


def normalised(fields: dict[str, Any]) -> dict[str, Any]:
    """The editable fields as the API shows them: unset ones null or []."""
    out = {name: fields.get(name) for name in EDITABLE_FIELDS}
    for name in ("gallery", "specs", "options", "paymentPlans", "floorsPlan", "readings"):
        out[name] = out[name] or []
    if out["expense"] is not None:
        out["expense"] = {"name": None, "value": None, **out["expense"]}
    for floor in out["floorsPlan"]:
        for key in (
            "floorsNumber",
            "floorName",
            "floorNameAr",
            "floorDesc",
            "floorDescAr",
            "rooms",
            "baths",
            "view",
            "area",
            "uom",
            "price",
            "extras",
            "floorImage",
        ):
            floor.setdefault(key, None)
    return out


def test_patch_over_http_matches_rfc_7396(sqlite_url: str) -> None:
    import asyncio

    async def run() -> None:
        settings_ = Settings(database_url=sqlite_url, access_log=False)
        async for api in start_api(settings_):
            await check_patches(api)

    asyncio.run(run())


async def check_patches(api: Api) -> None:
    unit = await api.create_unit(**START)
    path = f"/api/v2/units/{unit['id']}"
    cases: list[dict[str, Any]] = []

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(patch=patches)
    def collect(patch: dict[str, Any]) -> None:
        cases.append(patch)

    collect()
    current = unit
    for patch in cases:
        response = await api.request("PATCH", path, json=patch)
        expected_fields = merge_patch(editable(current), patch)
        location = expected_fields.get("unitLocation")
        if location is not None and "type" not in location:
            assert response.status_code == 422, response.text
            continue
        assert response.status_code == 200, (patch, response.text)
        got = (await api.request("GET", path)).json()
        assert editable(got) == normalised(expected_fields)
        current = got
