"""The console over HTTP, on both databases: sign-in and its cookie, CSRF, the security
headers, sessions ending with their key, what a read-only key sees and may post, the unit
form's 422 and 412, actions, bulk preview, and bad input answered by pages."""

from __future__ import annotations

import re
import uuid
from decimal import Decimal

import httpx
import pytest

from tests.conftest import READY_UNIT, Api
from units_api.console.i18n import LANGUAGE_COOKIE

CSRF = re.compile(r'name="csrf" value="([0-9a-f]+)"')


def csrf_of(page: httpx.Response) -> str:
    found = CSRF.search(page.text)
    assert found, page.text[:500]
    return found.group(1)


async def sign_in(api: Api, key: str | None = None) -> httpx.AsyncClient:
    """A browser-like client of the same app, signed in with `key` (the admin's by default)."""
    client = httpx.AsyncClient(transport=api.client._transport, base_url="http://units.test")
    form = await client.get("/console/login")
    answer = await client.post(
        "/console/login",
        data={"key": key or api.admin_key, "csrf": csrf_of(form), "next": "/console/units"},
    )
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"] == "/console/units"
    return client


async def test_sign_in_sets_a_strict_http_only_cookie_and_never_shows_the_key(api: Api) -> None:
    client = httpx.AsyncClient(transport=api.client._transport, base_url="http://units.test")
    form = await client.get("/console/login")
    assert form.status_code == 200
    answer = await client.post(
        "/console/login",
        data={"key": api.admin_key, "csrf": csrf_of(form), "next": "/console/units"},
    )
    cookie = next(
        value for name, value in answer.headers.multi_items() if value.startswith("units_console=")
    )
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/console" in cookie
    assert api.admin_key not in cookie
    page = await client.get("/console/units")
    assert page.status_code == 200
    assert api.admin_key not in page.text and api.admin_key[:12] not in page.text
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert "unsafe-inline" not in policy
    assert "<script>" not in page.text and " on" + "click=" not in page.text


async def test_a_wrong_key_or_missing_token_is_refused_with_a_page(api: Api) -> None:
    client = httpx.AsyncClient(transport=api.client._transport, base_url="http://units.test")
    form = await client.get("/console/login")
    wrong = await client.post(
        "/console/login", data={"key": "uak_nope", "csrf": csrf_of(form), "next": "/console/units"}
    )
    assert wrong.status_code == 401 and "That key was not accepted." in wrong.text
    assert "text/html" in wrong.headers["content-type"]
    tokenless = await client.post("/console/login", data={"key": api.admin_key})
    assert tokenless.status_code == 403
    assert "units_console=" not in tokenless.headers.get("set-cookie", "")


async def test_sign_in_is_rate_limited_per_address(api: Api) -> None:
    client = httpx.AsyncClient(transport=api.client._transport, base_url="http://units.test")
    form = await client.get("/console/login")
    token = csrf_of(form)
    statuses = [
        (await client.post("/console/login", data={"key": "uak_x", "csrf": token})).status_code
        for _ in range(12)
    ]
    assert statuses[:10] == [401] * 10
    assert statuses[10:] == [429, 429]


async def test_pages_need_a_session_and_come_back_after_sign_in(api: Api) -> None:
    client = httpx.AsyncClient(transport=api.client._transport, base_url="http://units.test")
    answer = await client.get("/console/units?city=Cairo")
    assert answer.status_code == 303
    assert answer.headers["location"] == "/console/login?next=%2Fconsole%2Funits%3Fcity%3DCairo"
    form = await client.get(answer.headers["location"])
    assert 'value="/console/units?city=Cairo"' in form.text
    back = await client.post(
        "/console/login",
        data={"key": api.admin_key, "csrf": csrf_of(form), "next": "/console/units?city=Cairo"},
    )
    assert back.headers["location"] == "/console/units?city=Cairo"
    away = await client.get("/console/language/ar?next=https://evil.example/")
    assert away.headers["location"] == "/console/units"


async def test_a_revoked_key_ends_its_sessions_at_the_next_request(api: Api) -> None:
    issued = await api.request(
        "POST", "/api/v2/api-keys", json={"name": "to revoke", "scopes": ["units:read"]}
    )
    key, key_id = issued.json()["key"], issued.json()["id"]
    client = await sign_in(api, key)
    assert (await client.get("/console/units")).status_code == 200
    assert (await api.request("DELETE", f"/api/v2/api-keys/{key_id}")).status_code == 204
    after = await client.get("/console/units")
    assert after.status_code == 303 and after.headers["location"].startswith("/console/login")


async def test_a_form_sent_after_the_session_ended_comes_back_to_its_page(api: Api) -> None:
    unit = await api.create_unit(**READY_UNIT)
    client = await sign_in(api)
    page = await client.get(f"/console/units/{unit['id']}")
    client.cookies.delete("units_console")
    answer = await client.post(
        f"/console/units/{unit['id']}/publishing",
        data={"csrf": csrf_of(page), "action": "publish", "version": "1"},
        headers={"referer": f"http://units.test/console/units/{unit['id']}"},
    )
    assert answer.status_code == 303
    assert answer.headers["location"] == (f"/console/login?next=%2Fconsole%2Funits%2F{unit['id']}")
    assert (await api.request("GET", f"/api/v2/units/{unit['id']}")).json()["version"] == 1


async def test_sign_out_ends_the_session(api: Api) -> None:
    client = await sign_in(api)
    page = await client.get("/console/units")
    assert (await client.post("/console/logout", data={})).status_code == 403
    out = await client.post("/console/logout", data={"csrf": csrf_of(page)})
    assert out.status_code == 303 and out.headers["location"] == "/console/login"
    assert (await client.get("/console/units")).status_code == 303


async def test_a_read_only_key_sees_no_edit_controls_and_its_posts_are_refused(api: Api) -> None:
    unit = await api.create_unit(**READY_UNIT)
    client = await sign_in(api, await api.create_key("units:read"))
    page = await client.get(f"/console/units/{unit['id']}")
    assert page.status_code == 200
    assert "/edit" not in page.text and 'name="action"' not in page.text
    assert "New unit" not in (await client.get("/console/units")).text
    refused = await client.post(
        f"/console/units/{unit['id']}/publishing",
        data={"csrf": csrf_of(page), "action": "publish", "version": "1"},
    )
    assert refused.status_code == 403
    edit = await client.get(f"/console/units/{unit['id']}/edit")
    assert edit.status_code == 403
    assert (await api.request("GET", f"/api/v2/units/{unit['id']}")).json()["version"] == 1


async def test_a_form_without_the_csrf_token_changes_nothing(api: Api) -> None:
    unit = await api.create_unit(**READY_UNIT)
    client = await sign_in(api)
    answer = await client.post(
        f"/console/units/{unit['id']}/publishing", data={"action": "publish", "version": "1"}
    )
    assert answer.status_code == 403
    assert (await api.request("GET", f"/api/v2/units/{unit['id']}")).json()["version"] == 1


async def test_search_in_arabic_and_the_filter_builder(api: Api) -> None:
    town = f"Town {uuid.uuid4().hex[:8]}"
    lake = await api.create_unit(name="Lake Villa", unitNameAr="فيلا البحيرة", city=town, price=100)
    desert = await api.create_unit(name="Desert Flat", city=town, type="flat", price=900)
    client = await sign_in(api)
    found = await client.get("/console/units", params={"q": "بحيرة", "city": town})
    assert lake["id"] in found.text and desert["id"] not in found.text
    built = await client.get("/console/units", params={"city": town, "minPrice": "500"})
    assert desert["id"] in built.text and lake["id"] not in built.text
    arabic = await client.get("/console/language/ar?next=/console/units")
    assert arabic.headers["location"] == "/console/units"
    page = await client.get("/console/units", params={"q": "بحيرة", "city": town})
    assert '<html lang="ar" dir="rtl">' in page.text
    assert "فيلا البحيرة" in page.text and "١٠٠" in page.text


async def test_a_bad_raw_filter_is_shown_on_the_page(api: Api) -> None:
    client = await sign_in(api)
    page = await client.get("/console/units", params={"p": "nope=="})
    assert page.status_code == 400
    assert 'class="problem"' in page.text and "<!doctype html>" in page.text


async def test_a_box_filter_keeps_units_inside_it(api: Api) -> None:
    inside = {"type": "Point", "coordinates": [31.2, 30.0]}
    outside = {"type": "Point", "coordinates": [29.9, 31.2]}
    town = f"Town {uuid.uuid4().hex[:8]}"
    kept = await api.create_unit(name="Inside", city=town, unitLocation=inside)
    left = await api.create_unit(name="Outside", city=town, unitLocation=outside)
    client = await sign_in(api)
    box = {"west": "31", "south": "29.5", "east": "31.5", "north": "30.5", "city": town}
    page = await client.get("/console/units", params=box)
    assert kept["id"] in page.text and left["id"] not in page.text
    assert page.text.count('class="point"') == 1


async def test_money_is_shown_and_written_exactly(api: Api) -> None:
    unit = await api.create_unit(name="Exact", price=Decimal("1234567.89"))
    client = await sign_in(api)
    page = await client.get(f"/console/units/{unit['id']}")
    assert "1,234,567.89" in page.text
    form = await client.get(f"/console/units/{unit['id']}/edit")
    assert 'value="1234567.89"' in form.text
    fields = {
        name: value
        for name, value in re.findall(r'<input[^>]* name="([^"]+)" value="([^"]*)"', form.text)
    }
    fields.update({"price": "98765432.10", "csrf": csrf_of(form), "_version": "1"})
    saved = await client.post(f"/console/units/{unit['id']}/edit", data=fields)
    assert saved.status_code == 303, saved.text
    stored = await api.request("GET", f"/api/v2/units/{unit['id']}")
    assert '"price":98765432.10' in stored.text.replace(" ", "")


async def test_values_in_nested_tables_are_escaped(api: Api) -> None:
    hostile = '<script>alert(1)</script> & "quoted"'
    plan = {"planName": hostile, "downPayment": Decimal("1000.5")}
    unit = await api.create_unit(name="Tables", paymentPlans=[plan])
    client = await sign_in(api)
    page = await client.get(f"/console/units/{unit['id']}")
    assert page.status_code == 200
    assert "<script>alert(1)</script>" not in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;quoted&quot;" in page.text
    assert '<td class="num">1,000.5</td>' in page.text


async def test_the_list_and_its_map_escape_every_value(api: Api) -> None:
    hostile = '<img src=x> & "q"'
    unit = await api.create_unit(
        name=hostile,
        city=hostile,
        price=Decimal("2500000.50"),
        unitLocation={"type": "Point", "coordinates": [31.2357, 30.0444]},
    )
    client = await sign_in(api)
    page = await client.get("/console/units", params={"q": "", "p": f"id=={unit['id']}"})
    assert page.status_code == 200
    assert "<img src=x>" not in page.text
    escaped = "&lt;img src=x&gt; &amp; &quot;q&quot;"
    link = f'<a href="/console/units/{unit["id"]}" dir="auto">{escaped}</a>'
    assert f'<tr><td>{link}</td><td dir="auto">Villa</td><td dir="auto">{escaped}</td>' in page.text
    assert '<td class="num">2,500,000.50 EGP</td>' in page.text  # with its currency
    assert '<span class="status status-draft">draft</span>' in page.text
    assert f"<title>{escaped}</title></circle></a>" in page.text  # the map's point


async def test_the_units_own_fields_are_escaped_and_formatted(api: Api) -> None:
    hostile = '<b>x</b> & "quoted"'
    unit = await api.create_unit(
        name=hostile,
        unitDesc=hostile,
        price=Decimal("1234567.25"),
        unitImageUrl='https://cdn.example.com/a.png?x=1&y="2"',
        gallery=["https://cdn.example.com/b.png?<i>"],
        unitLocation={"type": "Point", "coordinates": [31.2357, 30.0444]},
    )
    client = await sign_in(api)
    page = await client.get(f"/console/units/{unit['id']}")
    assert page.status_code == 200
    assert "<b>x</b>" not in page.text and "<i>" not in page.text
    escaped = "&lt;b&gt;x&lt;/b&gt; &amp; &quot;quoted&quot;"
    assert f'<dt title="unitDesc">Description</dt><dd dir="auto">{escaped}</dd>' in page.text
    assert '<dt title="price">Price</dt><dd class="num">1,234,567.25</dd>' in page.text
    image = "https://cdn.example.com/a.png?x=1&amp;y=&quot;2&quot;"
    assert f'<a href="{image}" rel="noopener noreferrer">{image}</a>' in page.text
    assert "https://cdn.example.com/b.png?&lt;i&gt;</a></li>" in page.text
    assert '<dd dir="ltr">31.2357, 30.0444</dd>' in page.text

    client.cookies.set(LANGUAGE_COOKIE, "ar")
    arabic = await client.get(f"/console/units/{unit['id']}")
    details = arabic.text.split('<dl class="fields">')[1]
    assert details.startswith('<dt title="unitNameAr">')  # the Arabic texts come first
    assert '<dd class="num">١٬٢٣٤٬٥٦٧٫٢٥</dd>' in details  # Arabic digits and separators


async def test_a_units_https_pictures_are_shown_and_allowed(api: Api) -> None:
    """The unit's image and gallery are drawn from their hosts when https (the policy allows
    https images, and no plain http ones); each keeps its link."""
    unit = await api.create_unit(
        name="Pictured",
        unitImageUrl="https://img.example.com/front.jpg",
        gallery=["https://img.example.com/hall.jpg", "http://plain.example.com/old.jpg"],
    )
    client = await sign_in(api)
    page = await client.get(f"/console/units/{unit['id']}")
    assert page.status_code == 200
    policy = page.headers["content-security-policy"]
    assert "img-src 'self' data: https:;" in policy
    drawn = re.findall(r'<img class="thumb" src="([^"]+)"', page.text)
    assert drawn == ["https://img.example.com/front.jpg", "https://img.example.com/hall.jpg"]
    assert '<a href="http://plain.example.com/old.jpg"' in page.text


async def test_validation_messages_sit_beside_their_fields(api: Api) -> None:
    unit = await api.create_unit(name="Form")
    client = await sign_in(api)
    form = await client.get(f"/console/units/{unit['id']}/edit")
    fields = {
        "csrf": csrf_of(form),
        "_version": "1",
        "name": "Form",
        "type": "villa",
        "price": "abc",
        "paymentPlans.0.minPrice": "10",
        "paymentPlans.0.maxPrice": "5",
    }
    answer = await client.post(f"/console/units/{unit['id']}/edit", data=fields)
    assert answer.status_code == 422
    assert 'id="price-error"' in answer.text
    assert 'value="abc"' in answer.text  # what was typed comes back
    assert 'id="paymentPlans.0.minPrice-error"' in answer.text
    assert (await api.request("GET", f"/api/v2/units/{unit['id']}")).json()["version"] == 1


async def test_a_stale_edit_says_someone_else_changed_it(api: Api) -> None:
    unit = await api.create_unit(name="Contested")
    client = await sign_in(api)
    form = await client.get(f"/console/units/{unit['id']}/edit")
    await api.request("PATCH", f"/api/v2/units/{unit['id']}", json={"price": 5})
    fields = {"csrf": csrf_of(form), "_version": "1", "name": "Mine", "type": "villa"}
    answer = await client.post(f"/console/units/{unit['id']}/edit", data=fields)
    assert answer.status_code == 412
    assert "Changed by someone else since you opened it." in answer.text
    assert f'href="/console/units/{unit["id"]}"' in answer.text
    assert 'value="Mine"' in answer.text
    stored = (await api.request("GET", f"/api/v2/units/{unit['id']}")).json()
    assert stored["name"] == "Contested" and stored["version"] == 2


async def test_create_with_nested_rows_and_a_blank_row_left_out(api: Api) -> None:
    client = await sign_in(api)
    form = await client.get("/console/units/new")
    fields = {
        "csrf": csrf_of(form),
        "name": "Row House",
        "type": "townhouse",
        "unitLocation.lng": "31.5",
        "unitLocation.lat": "30.1",
        "paymentPlans.0.planName": "Ten years",
        "paymentPlans.0.default": "true",
        "paymentPlans.0.downPayment": "100000",
        "paymentPlans.1.planName": "",
        "gallery": "https://cdn.example.com/a.jpg\n\nhttps://cdn.example.com/b.jpg",
    }
    answer = await client.post("/console/units/new", data=fields)
    assert answer.status_code == 303, answer.text
    unit_id = answer.headers["location"].split("/")[3].split("?")[0]
    stored = (await api.request("GET", f"/api/v2/units/{unit_id}")).json()
    assert stored["paymentPlans"] == [
        {
            **{k: None for k in stored["paymentPlans"][0]},
            "planName": "Ten years",
            "default": True,
            "downPayment": 100000,
        }
    ]
    assert stored["unitLocation"]["coordinates"] == [31.5, 30.1]
    assert len(stored["gallery"]) == 2
    history = (await client.get(f"/console/units/{unit_id}")).text
    assert "test admin" in history and "<td>Created</td>" in history


async def test_only_allowed_actions_are_offered_and_they_apply(api: Api) -> None:
    unit = await api.create_unit(**READY_UNIT)
    client = await sign_in(api)
    page = await client.get(f"/console/units/{unit['id']}")
    offered = set(re.findall(r'name="action" value="(\w+)"', page.text))
    assert offered == {"publish", "schedule", "archive", "reserve", "sell", "block"}
    done = await client.post(
        f"/console/units/{unit['id']}/publishing",
        data={"csrf": csrf_of(page), "action": "publish", "version": "1", "channels": "website"},
    )
    assert done.status_code == 303
    stored = (await api.request("GET", f"/api/v2/units/{unit['id']}")).json()
    assert stored["publishing"]["status"] == "published"
    assert stored["publishing"]["channels"] == ["website"]
    page = await client.get(f"/console/units/{unit['id']}")
    assert "unpublish" in set(re.findall(r'name="action" value="(\w+)"', page.text))


async def test_bulk_previews_then_applies(api: Api) -> None:
    town = f"Bulkton {uuid.uuid4().hex[:8]}"
    for _ in range(3):
        await api.create_unit(name="Bulk", city=town, price=10)
    client = await sign_in(api)
    form = await client.get("/console/bulk")
    data = {"csrf": csrf_of(form), "filter": f'city=="{town}"', "price": "20.5"}
    preview = await client.post("/console/bulk", data=data)
    assert 'id="preview"' in preview.text and "3 units would change" in preview.text
    listed = (await api.request("GET", "/api/v2/units/", params={"p": f'city=="{town}"'})).json()
    assert {unit["price"] for unit in listed["data"]} == {10}
    changed = await client.post("/console/bulk", data={**data, "price": "99", "_apply": "1"})
    assert 'id="preview"' in changed.text  # edited after its preview: previewed again
    listed = (await api.request("GET", "/api/v2/units/", params={"p": f'city=="{town}"'})).json()
    assert {unit["price"] for unit in listed["data"]} == {10}
    previewed = re.search(r'name="_previewed" value="([^"]+)"', preview.text)
    assert previewed
    applied = await client.post(
        "/console/bulk",
        data={**data, "_apply": "1", "_previewed": previewed.group(1).replace("&#34;", '"')},
    )
    assert "3 changed" in applied.text
    listed = (await api.request("GET", "/api/v2/units/", params={"p": f'city=="{town}"'})).json()
    assert {unit["price"] for unit in listed["data"]} == {20.5}


async def test_unknown_console_paths_are_pages(api: Api) -> None:
    client = await sign_in(api)
    answer = await client.get("/console/nothing-here")
    assert answer.status_code == 404 and "text/html" in answer.headers["content-type"]
    missing = await client.get("/console/units/01890000-0000-7000-8000-000000000000")
    assert missing.status_code == 404 and "Not found." in missing.text


@pytest.mark.parametrize("path", ["/console/static/console.css", "/console/static/console.js"])
async def test_static_files_are_served(api: Api, path: str) -> None:
    answer = await api.client.get(path)
    assert answer.status_code == 200 and len(answer.content) > 500


async def test_the_listing_fields_have_inputs_of_their_kind_and_show_in_both_languages(
    api: Api,
) -> None:
    client = await sign_in(api)
    form = await client.get("/console/units/new")
    assert '<select id="f-offeringType" name="offeringType">' in form.text
    assert '<option value="offPlan">Off-plan</option>' in form.text
    assert re.search(
        r'<input id="f-handoverDate" name="handoverDate" value="" type="date"', form.text
    )
    assert re.search(r'<input id="f-currency" name="currency" value=""[^>]* dir="ltr"', form.text)
    fields = {
        "csrf": csrf_of(form),
        "name": "Off-plan Villa",
        "type": "villa",
        "country": "EG",
        "offeringType": "sale",
        "bedrooms": "4",
        "bathrooms": "٣",
        "completionStatus": "offPlan",
        "handoverDate": "2028-06-30",
    }
    answer = await client.post("/console/units/new", data=fields)
    assert answer.status_code == 303, answer.text
    unit_id = answer.headers["location"].split("/")[3].split("?")[0]
    stored = (await api.request("GET", f"/api/v2/units/{unit_id}")).json()
    assert (stored["bedrooms"], stored["bathrooms"], stored["currency"]) == (4, 3, None)
    assert (stored["completionStatus"], stored["handoverDate"]) == ("offPlan", "2028-06-30")
    page = (await client.get(f"/console/units/{unit_id}")).text
    assert '<dt title="bedrooms">Bedrooms</dt><dd class="num">4</dd>' in page
    assert '<dt title="completionStatus">Completion</dt><dd>Off-plan</dd>' in page
    assert '<dt title="currency">Currency</dt><dd dir="ltr">EGP (by default)</dd>' in page
    assert '<dt title="handoverDate">Handover date</dt><dd dir="ltr">2028-06-30</dd>' in page
    edit = await client.get(f"/console/units/{unit_id}/edit")
    assert '<option value="offPlan" selected>Off-plan</option>' in edit.text
    client.cookies.set(LANGUAGE_COOKIE, "ar")
    arabic = (await client.get(f"/console/units/{unit_id}")).text
    assert '<dt title="bedrooms">غرف النوم</dt><dd class="num">٤</dd>' in arabic
    assert '<dt title="offeringType">نوع العرض</dt><dd>بيع</dd>' in arabic
    assert "EGP (افتراضيًا)" in arabic


async def test_a_bad_listing_value_is_named_beside_its_field(api: Api) -> None:
    client = await sign_in(api)
    form = await client.get("/console/units/new")
    fields = {
        "csrf": csrf_of(form),
        "name": "Early",
        "type": "villa",
        "currency": "egp",
        "completionStatus": "ready",
        "handoverDate": "2028-06-30",
    }
    answer = await client.post("/console/units/new", data=fields)
    assert answer.status_code == 422
    assert 'id="currency-error"' in answer.text and 'id="handoverDate-error"' in answer.text
    assert '<option value="ready" selected>Ready</option>' in answer.text
