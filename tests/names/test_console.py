"""Display names in the console on both databases: an Arabic page shows a type and a city by
their Arabic names (the list, a unit's page and its history, the filter's choices), an
English page by their English ones, a filter takes a name in either language, and the admin
page sets, overrides and deletes names."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from urllib.parse import quote

import httpx
import pytest

from tests.conftest import Api
from tests.console.test_pages import csrf_of, sign_in

NAMES = "/api/v2/display-names"


@pytest.fixture
async def town(api: Api) -> AsyncIterator[str]:
    """A city of this test's own, named in both languages; its names deleted afterwards."""
    name = f"Lake Town {uuid.uuid4().hex[:8]}"
    answer = await api.request(
        "PUT", f"{NAMES}/city/{quote(name)}", json={"en": name, "ar": f"مدينة {name[-8:]}"}
    )
    assert answer.status_code == 201, answer.text
    yield name
    await api.request("DELETE", f"{NAMES}/city/{quote(name)}")


async def in_arabic(client: httpx.AsyncClient) -> None:
    await client.get("/console/language/ar?next=/console/units")


def cells(page: httpx.Response) -> list[str]:
    return re.findall(r'<td dir="auto">([^<]*)</td>', page.text)


async def test_an_arabic_page_shows_arabic_types_and_cities(api: Api, town: str) -> None:
    project = f"names-{uuid.uuid4()}"
    twin = await api.create_unit(type="twin house", city="New Cairo", subProjectId=project)
    other = await api.create_unit(type="Penthouse", city=town, subProjectId=project)
    client = await sign_in(api)
    await in_arabic(client)
    page = await client.get("/console/units", params={"p": f"subProjectId=={project}"})
    assert page.status_code == 200 and 'lang="ar"' in page.text
    shown = cells(page)
    for arabic in ("توين هاوس", "القاهرة الجديدة", "بنتهاوس", f"مدينة {town[-8:]}"):
        assert arabic in shown
    for english in ("twin house", "New Cairo", "Penthouse", town):
        assert english not in shown
    # The filter's choices are the names, in Arabic.
    assert '<option value="القاهرة الجديدة">' in page.text
    assert '<option value="توين هاوس">' in page.text
    assert '<option value="New Cairo">' not in page.text
    unit = await client.get(f"/console/units/{twin['id']}")
    assert '<dd dir="auto">توين هاوس</dd>' in unit.text
    assert '<dd dir="auto">القاهرة الجديدة</dd>' in unit.text
    assert ">twin house<" not in unit.text and ">New Cairo<" not in unit.text
    assert other["id"] in page.text


async def test_an_english_page_shows_english_names(api: Api) -> None:
    project = f"names-{uuid.uuid4()}"
    unit = await api.create_unit(type="twin house", city="riyadh", subProjectId=project)
    client = await sign_in(api)
    page = await client.get("/console/units", params={"p": f"subProjectId=={project}"})
    assert {"Twin house", "Riyadh"} <= set(cells(page))
    assert "twin house" not in cells(page)
    one = await client.get(f"/console/units/{unit['id']}")
    assert '<dd dir="auto">Twin house</dd>' in one.text and '<dd dir="auto">Riyadh</dd>' in one.text


async def test_a_change_in_history_is_shown_by_its_names(api: Api) -> None:
    unit = await api.create_unit(type="villa", city="Cairo")
    changed = await api.request("PATCH", f"/api/v2/units/{unit['id']}", json={"city": "Dubai"})
    assert changed.status_code == 200, changed.text
    client = await sign_in(api)
    await in_arabic(client)
    page = await client.get(f"/console/units/{unit['id']}")
    # The change in words, each value by its Arabic name, read right to left.
    assert '<span title="city">المدينة</span>: <bdi dir="rtl">القاهرة ← دبي</bdi>' in page.text


async def test_the_filter_takes_a_name_in_either_language(api: Api, town: str) -> None:
    project = f"names-{uuid.uuid4()}"
    here = await api.create_unit(city=town.upper(), type="chalet", subProjectId=project)
    there = await api.create_unit(city="Jeddah", type="chalet", subProjectId=project)
    client = await sign_in(api)
    raw = {"p": f"subProjectId=={project}"}
    by_arabic = await client.get("/console/units", params={**raw, "city": f"مدينة {town[-8:]}"})
    assert here["id"] in by_arabic.text and there["id"] not in by_arabic.text
    by_value = await client.get("/console/units", params={**raw, "city": "jeddah"})
    assert there["id"] in by_value.text and here["id"] not in by_value.text
    by_type = await client.get("/console/units", params={**raw, "type": "شاليه"})
    assert here["id"] in by_type.text and there["id"] in by_type.text


async def test_the_admin_page_sets_overrides_and_deletes_names(api: Api) -> None:
    client = await sign_in(api)
    await in_arabic(client)
    form = await client.get("/console/display-names")
    assert form.status_code == 200 and "أسماء العرض" in form.text
    assert "توين هاوس" in form.text and "مدمج" in form.text
    value = f"Oasis {uuid.uuid4().hex[:8]}"
    token = csrf_of(form)
    saved = await client.post(
        "/console/display-names",
        data={"csrf": token, "field": "city", "value": value, "en": "Oasis", "ar": "الواحة"},
    )
    assert saved.status_code == 303, saved.text
    entry = (await api.request("GET", f"{NAMES}/city/{quote(value)}")).json()
    assert (entry["en"], entry["ar"]) == ("Oasis", "الواحة")
    listed = await client.get(saved.headers["location"])
    assert "الواحة" in listed.text and value.casefold() in listed.text
    edit = await client.get(
        "/console/display-names", params={"field": "city", "value": entry["value"]}
    )
    assert 'value="الواحة"' in edit.text and 'value="Oasis"' in edit.text
    refused = await client.post(
        "/console/display-names",
        data={"csrf": token, "field": "city", "value": value, "en": "", "ar": "x" * 101},
    )
    assert refused.status_code == 422
    assert 'id="en-error"' in refused.text and 'id="ar-error"' in refused.text
    deleted = await client.post(
        "/console/display-names/delete",
        data={"csrf": token, "field": "city", "value": entry["value"]},
    )
    assert deleted.status_code == 303
    assert (await api.request("GET", f"{NAMES}/city/{quote(value)}")).status_code == 404


async def test_an_override_made_on_the_admin_page_shows_at_once(api: Api) -> None:
    unit = await api.create_unit(type="studio", city="Giza")
    client = await sign_in(api)
    await in_arabic(client)
    token = csrf_of(await client.get("/console/display-names"))
    try:
        saved = await client.post(
            "/console/display-names",
            data={
                "csrf": token,
                "field": "type",
                "value": "Studio",
                "en": "Studio flat",
                "ar": "ستوديو",
            },
        )
        assert saved.status_code == 303
        page = await client.get(f"/console/units/{unit['id']}")
        assert '<dd dir="auto">ستوديو</dd>' in page.text
        listed = await client.get("/console/display-names", params={"show": "type"})
        assert "يحل محل المدمج" in listed.text and "العودة إلى المدمج" in listed.text
    finally:
        reset = await client.post(
            "/console/display-names/delete",
            data={"csrf": token, "field": "type", "value": "studio"},
        )
        assert reset.status_code == 303
    page = await client.get(f"/console/units/{unit['id']}")
    assert '<dd dir="auto">استوديو</dd>' in page.text


async def test_only_an_admin_key_has_the_page(api: Api) -> None:
    client = await sign_in(api, await api.create_key("units:read", "units:write"))
    page = await client.get("/console/units")
    assert "/console/display-names" not in page.text
    assert (await client.get("/console/display-names")).status_code == 403
    token = csrf_of(page) if 'name="csrf"' in page.text else ""
    posted = await client.post(
        "/console/display-names",
        data={"csrf": token, "field": "city", "value": "x", "en": "x", "ar": "y"},
    )
    assert posted.status_code == 403


async def test_a_name_is_escaped_like_any_value(api: Api) -> None:
    value = f"tower {uuid.uuid4().hex[:8]}"
    hostile = "<img src=x> & برج"
    put = await api.request("PUT", f"{NAMES}/type/{quote(value)}", json={"en": "T", "ar": hostile})
    assert put.status_code == 201, put.text
    try:
        unit = await api.create_unit(type=value)
        client = await sign_in(api)
        await in_arabic(client)
        escaped = "&lt;img src=x&gt; &amp; برج"
        for path in ("/console/units", f"/console/units/{unit['id']}", "/console/display-names"):
            page = await client.get(
                path, params={"p": f"id=={unit['id']}"} if path == "/console/units" else {}
            )
            assert "<img src=x>" not in page.text and escaped in page.text, path
    finally:
        await api.request("DELETE", f"{NAMES}/type/{quote(value)}")
