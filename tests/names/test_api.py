"""The display names' API on both databases: built-in entries, creating, replacing and
deleting stored ones, overriding a built-in one, values matched as filters match text, the
422s with their paths, the scopes, and the process's copy of the map."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import pytest

from tests.conftest import Api
from tests.http.test_errors import assert_problem
from units_api.names import repository, service
from units_api.names.service import NameCache
from units_api.names.values import MAX_NAME, MAX_VALUE

NAMES = "/api/v2/display-names"


def path(field: str, value: str) -> str:
    return f"{NAMES}/{field}/{quote(value, safe='')}"


async def listed(api: Api, field: str | None = None, key: str | None = None) -> list[Any]:
    response = await api.request("GET", NAMES, params={"field": field} if field else {}, key=key)
    assert response.status_code == 200, response.text
    data: list[Any] = response.json()["data"]
    return data


def fields_of(problem: dict[str, Any]) -> dict[str, str]:
    return {error["field"]: error["message"] for error in problem["errors"]}


@pytest.fixture
async def town(api: Api) -> AsyncIterator[str]:
    """A city of this test's own, its stored names deleted afterwards."""
    name = f"Lake Town {uuid.uuid4().hex[:8]}"
    yield name
    await api.request("DELETE", path("city", name))


@pytest.fixture
async def restored(api: Api) -> AsyncIterator[list[tuple[str, str]]]:
    """Built-in values a test overrides, given back their built-in names afterwards."""
    overridden: list[tuple[str, str]] = []
    yield overridden
    for field, value in overridden:
        await api.request("DELETE", path(field, value))


async def test_the_built_in_names_are_listed_and_marked(api: Api) -> None:
    types = {entry["value"]: entry for entry in await listed(api, "type")}
    assert {entry["field"] for entry in types.values()} == {"type"}
    twin = types["twin house"]
    assert (twin["en"], twin["ar"]) == ("Twin house", "توين هاوس")
    assert twin["builtIn"] is True and twin["updatedAt"] is None
    assert twin["builtInNames"] == {"en": "Twin house", "ar": "توين هاوس"}
    assert types["penthouse"]["en"] == "Penthouse" and types["apartment"]["ar"] == "شقة"
    cities = {entry["value"]: entry for entry in await listed(api, "city")}
    assert cities["new cairo"]["ar"] == "القاهرة الجديدة" and cities["riyadh"]["ar"] == "الرياض"
    everything = await listed(api)
    assert {("type", "villa"), ("city", "dubai"), ("country", "eg")} <= {
        (entry["field"], entry["value"]) for entry in everything
    }
    keys = [(entry["field"], entry["value"]) for entry in everything]
    assert keys == sorted(keys)
    one = await api.request("GET", path("type", "  Twin   HOUSE "))
    assert one.status_code == 200 and one.json() == twin


async def test_put_creates_then_replaces_and_values_match_case_insensitively(
    api: Api, town: str
) -> None:
    created = await api.request("PUT", path("city", f"  {town} "), json={"en": town, "ar": "بحيرة"})
    assert created.status_code == 201, created.text
    value = " ".join(town.split()).casefold()
    assert created.headers["location"] == path("city", value)
    entry = created.json()
    assert entry["value"] == value and (entry["en"], entry["ar"]) == (town, "بحيرة")
    assert entry["builtIn"] is False and entry["builtInNames"] is None
    assert entry["updatedAt"].endswith("Z")
    replaced = await api.request(
        "PUT", path("city", town.upper()), json={"en": f" {town} ", "ar": " مدينة البحيرة "}
    )
    assert replaced.status_code == 200, replaced.text
    assert (replaced.json()["en"], replaced.json()["ar"]) == (town, "مدينة البحيرة")
    found = await api.request("GET", path("city", town.lower().replace(" ", "  ") + "/"))
    assert found.status_code == 200 and found.json() == replaced.json()
    assert [e for e in await listed(api, "city") if e["value"] == value] == [replaced.json()]
    assert (await api.request("DELETE", path("city", town))).status_code == 204
    assert_problem(await api.request("GET", path("city", town)), 404)
    gone = assert_problem(await api.request("DELETE", path("city", town)), 404)
    assert value in str(gone["detail"])


async def test_a_value_with_a_slash_is_named_too(api: Api) -> None:
    value = f"block {uuid.uuid4().hex[:6]}/b"
    created = await api.request("PUT", path("location", value), json={"en": "B", "ar": "ب"})
    assert created.status_code == 201, created.text
    assert (await api.request("GET", f"{NAMES}/location/{value}")).json()["ar"] == "ب"
    assert (await api.request("DELETE", f"{NAMES}/location/{value}")).status_code == 204


async def test_an_override_of_a_built_in_name_falls_back_when_deleted(
    api: Api, restored: list[tuple[str, str]]
) -> None:
    restored.append(("type", "penthouse"))
    put = await api.request(
        "PUT", path("type", "Penthouse"), json={"en": "Sky villa", "ar": "سكاي"}
    )
    assert put.status_code == 201, put.text
    entry = put.json()
    assert (entry["en"], entry["ar"], entry["builtIn"]) == ("Sky villa", "سكاي", False)
    assert entry["builtInNames"] == {"en": "Penthouse", "ar": "بنتهاوس"}
    names = await api.context.names.current()
    assert names.display("type", "PENTHOUSE", "ar") == "سكاي"
    listed_once = [e for e in await listed(api, "type") if e["value"] == "penthouse"]
    assert listed_once == [entry]
    assert (await api.request("DELETE", path("type", "penthouse "))).status_code == 204
    back = (await api.request("GET", path("type", "penthouse"))).json()
    assert (back["en"], back["ar"], back["builtIn"]) == ("Penthouse", "بنتهاوس", True)
    assert (await api.context.names.current()).display("type", "penthouse", "ar") == "بنتهاوس"
    # A built-in entry has nothing stored to delete: its names stay.
    kept = assert_problem(await api.request("DELETE", path("type", "penthouse")), 404)
    assert "built-in names stay" in str(kept["detail"])


@pytest.mark.parametrize(
    ("field", "value", "body", "errors"),
    [
        ("colour", "red", {"en": "Red", "ar": "أحمر"}, {"field"}),
        ("city", " ", {"en": "x", "ar": "y"}, {"value"}),
        ("city", "a\x00b", {"en": "x", "ar": "y"}, {"value"}),
        ("location", "line\nbreak", {"en": "x", "ar": "y"}, {"value"}),
        ("location", "a/b\r\n", {"en": "x", "ar": "y"}, {"value"}),
        ("city", "v" * (MAX_VALUE + 1), {"en": "x", "ar": "y"}, {"value"}),
        ("city", "x", {"en": "", "ar": "   "}, {"en", "ar"}),
        ("city", "x", {"en": "e" * (MAX_NAME + 1), "ar": "y"}, {"en"}),
        ("city", "x", {"en": "x", "ar": "y", "fr": "z"}, {"fr"}),
        ("city", "x", {"en": "x"}, {"ar"}),
        ("city", "x", {"en": 5, "ar": None}, {"en", "ar"}),
        ("city", "x", {"en": "a\tb", "ar": "y"}, {"en"}),
        ("type", " ", {"ar": "y", "x": 1}, {"value", "en", "x"}),
        ("city", "x", ["en", "ar"], {""}),
    ],
)
async def test_bad_input_is_a_422_naming_every_path(
    api: Api, field: str, value: str, body: Any, errors: set[str]
) -> None:
    response = await api.request("PUT", f"{NAMES}/{field}/{quote(value)}", json=body)
    problem = assert_problem(response, 422)
    assert problem["type"] == "/problems/validation-error"
    assert set(fields_of(problem)) == errors
    if field == "colour":
        assert "'city'" in fields_of(problem)["field"]  # names the fields allowed


async def test_bad_paths_and_parameters_of_the_other_operations(api: Api) -> None:
    for method in ("GET", "DELETE"):
        problem = assert_problem(await api.request(method, f"{NAMES}/colour/red"), 422)
        assert set(fields_of(problem)) == {"field"}
    problem = assert_problem(await api.request("GET", NAMES, params={"field": "colour"}), 400)
    assert problem["parameter"] == "field"
    unknown = assert_problem(await api.request("GET", NAMES, params={"fields": "city"}), 400)
    assert unknown["type"] == "/problems/unknown-parameter"
    assert_problem(await api.request("GET", path("city", f"nowhere {uuid.uuid4()}")), 404)
    text = await api.request(
        "PUT", path("city", "x"), content=b"en=x", headers={"content-type": "text/plain"}
    )
    assert_problem(text, 415)
    broken = await api.request(
        "PUT", path("city", "x"), content=b"{", headers={"content-type": "application/json"}
    )
    assert_problem(broken, 400)


async def test_a_read_key_reads_and_only_an_admin_key_writes(api: Api, town: str) -> None:
    reader = await api.create_key("units:read")
    writer = await api.create_key("units:write")
    assert await listed(api, "type", key=reader)
    assert (await api.request("GET", path("type", "villa"), key=reader)).status_code == 200
    body = {"en": town, "ar": "مدينة"}
    for key in (reader, writer):
        assert_problem(await api.request("PUT", path("city", town), json=body, key=key), 403)
    assert_problem(await api.request("GET", NAMES, key=writer), 403)
    assert (await api.request("PUT", path("city", town), json=body)).status_code == 201
    assert_problem(await api.request("DELETE", path("city", town), key=reader), 403)
    anonymous = await api.client.get(NAMES)
    assert_problem(anonymous, 401)
    assert (await api.request("GET", path("city", town), key=reader)).json()["ar"] == "مدينة"


async def test_no_more_than_the_cap_are_stored(
    api: Api, monkeypatch: pytest.MonkeyPatch, town: str
) -> None:
    async with api.context.db.read() as conn:
        stored = await repository.count(conn)
    monkeypatch.setattr(service, "MAX_STORED", stored + 1)
    first = await api.request("PUT", path("city", town), json={"en": "a", "ar": "ب"})
    assert first.status_code == 201, first.text
    other = f"{town} other"
    refused = assert_problem(
        await api.request("PUT", path("city", other), json={"en": "a", "ar": "ب"}), 409
    )
    assert f"{stored + 1:,}" in str(refused["detail"])
    assert_problem(await api.request("GET", path("city", other)), 404)
    again = await api.request("PUT", path("city", town), json={"en": "b", "ar": "ج"})
    assert again.status_code == 200  # replacing one is no new entry


async def test_the_process_copy_shows_its_own_writes_at_once_and_others_when_read_again(
    api: Api, town: str
) -> None:
    elsewhere = NameCache(api.context.db, seconds=3600)  # another process's copy
    assert (await elsewhere.current()).name("city", town) is None
    assert (await api.context.names.current()).display("city", town, "ar") == town
    put = await api.request("PUT", path("city", town), json={"en": "Lakeside", "ar": "البحيرة"})
    assert put.status_code == 201
    here = await api.context.names.current()
    assert here.display("city", f" {town.upper()} ", "ar") == "البحيرة"
    assert here.display("city", town, "en") == "Lakeside"
    assert (await elsewhere.current()).name("city", town) is None  # still its copy
    assert (await NameCache(api.context.db, seconds=0).current()).name("city", town) is not None
    elsewhere.forget()
    assert (await elsewhere.current()).display("city", town, "ar") == "البحيرة"
