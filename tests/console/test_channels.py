"""Channels in the console over HTTP, on both databases, in English and Arabic: a unit's
standing on its channels, publishing by checking channels (and a channel's readiness 422 in
a manager's words), and the admin's channels page (create, replace, a feed token shown
once, rotate, delete after a confirmation)."""

from __future__ import annotations

import re
import uuid

import httpx

from tests.conftest import READY_UNIT, Api
from tests.console.test_pages import csrf_of, sign_in
from units_api.console.i18n import LANGUAGE_COOKIE

TOKEN = re.compile(r'id="feed-token-value" class="copy" value="(uft_[^"]+)" readonly')


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def channel_rows(page: str) -> str:
    return page.split('id="channels-heading"')[1].split("</table>")[0]


async def arabic(client: httpx.AsyncClient) -> httpx.AsyncClient:
    client.cookies.set(LANGUAGE_COOKIE, "ar")
    return client


async def test_the_unit_page_shows_each_channel_live_or_why_not(api: Api) -> None:
    label = unique("shop")
    await api.add_channel(label)
    unit = await api.create_unit(**READY_UNIT)
    path = f"/api/v2/units/publishing-actions/{unit['id']}"
    body = {"action": "publish", "channels": ["website", label]}
    published = await api.request("PUT", path, json=body, headers={"if-match": '"1"'})
    assert published.status_code == 200, published.text
    client = await sign_in(api)
    rows = channel_rows((await client.get(f"/console/units/{unit['id']}")).text)
    public = f"http://units.test/listings/{unit['id']}"
    assert (
        f'<td dir="ltr">website</td>\n      <td>Website</td>\n      <td>Yes</td>\n'
        f'      <td></td>\n      <td dir="ltr"><a href="{public}" rel="noopener noreferrer">'
        f"{public}</a></td>"
    ) in rows.replace("<td>website</td>", "<td>Website</td>")
    assert f'<td dir="ltr">{label}</td>' in rows and f"<td>{label}</td>" not in rows

    cleared = await api.request("PATCH", f"/api/v2/units/{unit['id']}", json={"city": None})
    assert cleared.status_code == 200, cleared.text
    rows = channel_rows((await client.get(f"/console/units/{unit['id']}")).text)
    assert "<td>No</td>\n      <td>Missing: City</td>" in rows
    rows = channel_rows((await (await arabic(client)).get(f"/console/units/{unit['id']}")).text)
    assert "<td>الموقع الإلكتروني</td>" in rows
    assert "<td>لا</td>\n      <td>ينقصها: المدينة</td>" in rows

    mended = await api.request("PATCH", f"/api/v2/units/{unit['id']}", json={"city": "Cairo"})
    version = f'"{mended.json()["version"]}"'
    unpublish = {"action": "unpublish"}
    unpublished = await api.request("PUT", path, json=unpublish, headers={"if-match": version})
    assert unpublished.status_code == 200, unpublished.text
    arabic_rows = channel_rows((await client.get(f"/console/units/{unit['id']}")).text)
    assert "<td>غير منشورة</td>" in arabic_rows
    client.cookies.set(LANGUAGE_COOKIE, "en")
    rows = channel_rows((await client.get(f"/console/units/{unit['id']}")).text)
    assert "<td>No</td>\n      <td>not published</td>" in rows


async def test_publishing_sends_the_checked_channels(api: Api) -> None:
    label = unique("app")
    await api.add_channel(label)
    unit = await api.create_unit(**READY_UNIT)
    client = await sign_in(api)
    page = await client.get(f"/console/units/{unit['id']}")
    boxes = dict(re.findall(r'name="channels" value="([^"]+)"( checked)?>', page.text))
    assert boxes["website"] == "" and boxes[label] == ""
    assert "Channels (comma separated)" not in page.text
    done = await client.post(
        f"/console/units/{unit['id']}/publishing",
        data={
            "csrf": csrf_of(page),
            "action": "publish",
            "version": "1",
            "channels": ["website", label],
        },
    )
    assert done.status_code == 303, done.text
    stored = (await api.request("GET", f"/api/v2/units/{unit['id']}")).json()
    assert stored["publishing"]["channels"] == ["website", label]
    page = await client.get(f"/console/units/{unit['id']}")
    assert f'name="channels" value="{label}" checked>' in page.text
    assert 'name="channels" value="website" checked>' in page.text

    other = await api.create_unit(**READY_UNIT)
    put = await api.request(
        "PUT",
        f"/api/v2/units/publishing-actions/{other['id']}",
        json={"action": "schedule", "at": "2030-01-01T00:00:00Z", "channels": [label]},
        headers={"if-match": '"1"'},
    )
    assert put.status_code == 200, put.text
    page = await client.get(f"/console/units/{other['id']}")
    assert f'name="channels" value="{label}" checked>' in page.text
    unchecked = {"csrf": csrf_of(page), "action": "publish", "version": "2", "_channels": "1"}
    done = await client.post(f"/console/units/{other['id']}/publishing", data=unchecked)
    assert done.status_code == 303, done.text
    stored = (await api.request("GET", f"/api/v2/units/{other['id']}")).json()
    assert stored["publishing"]["channels"] == []  # every box unchecked: on no channel


async def test_a_channels_readiness_is_said_in_the_managers_words(api: Api) -> None:
    meta = unique("meta")
    await api.add_channel(meta, "meta-catalog")
    unit = await api.create_unit(**READY_UNIT)  # no map position, location or description
    client = await sign_in(api)
    page = await client.get(f"/console/units/{unit['id']}")
    form = {"csrf": csrf_of(page), "action": "publish", "version": "1", "channels": meta}
    refused = await client.post(f"/console/units/{unit['id']}/publishing", data=form)
    assert refused.status_code == 422
    said = refused.text.split('id="refused"')[1].split("</div>")[0]
    assert f'<li title="channel {meta} (meta-catalog) needs a map position' in said
    assert f">Channel {meta} needs a map position</li>" in said
    assert f">Channel {meta} needs a description</li>" in said
    assert 'name="action" value="publish"' in refused.text  # the form, to try again
    assert (await api.request("GET", f"/api/v2/units/{unit['id']}")).json()["version"] == 1

    await arabic(client)
    refused = await client.post(f"/console/units/{unit['id']}/publishing", data=form)
    assert refused.status_code == 422
    assert f">القناة {meta} تحتاج إلى موقع على الخريطة</li>" in refused.text

    bare = await api.create_unit(name="Bare", type="villa", city=None)
    page = await client.get(f"/console/units/{bare['id']}")
    form = {"csrf": csrf_of(page), "action": "publish", "version": "1", "channels": "website"}
    refused = await client.post(f"/console/units/{bare['id']}/publishing", data=form)
    assert ">القناة website تحتاج إلى مدينة</li>" in refused.text
    assert ">المدينة مطلوب للنشر</li>" in refused.text
    client.cookies.set(LANGUAGE_COOKIE, "en")
    refused = await client.post(f"/console/units/{bare['id']}/publishing", data=form)
    assert ">Channel website needs a city</li>" in refused.text
    assert ">City is needed to publish</li>" in refused.text


async def test_channels_are_created_replaced_and_their_feed_token_shown_once(api: Api) -> None:
    client = await sign_in(api)
    page = await client.get("/console/channels")
    assert page.status_code == 200
    assert '<a href="/console/channels" aria-current="page">Channels</a>' in page.text
    assert '<td dir="ltr">website</td>' in page.text
    assert 'href="/console/channels/website/delete"' not in page.text
    label = unique("print")
    saved = await client.post(
        "/console/channels", data={"csrf": csrf_of(page), "name": label, "kind": "label"}
    )
    assert saved.status_code == 303 and saved.headers["location"] == "/console/channels?done=saved"
    read = (await api.request("GET", f"/api/v2/channels/{label}")).json()
    assert read["kind"] == "label"

    meta = unique("meta")
    template = "https://homes.example.com/u/{id}"
    form = {"csrf": csrf_of(page), "name": meta, "kind": "meta-catalog", "urlTemplate": template}
    created = await client.post("/console/channels", data=form)
    assert created.status_code == 200
    token = TOKEN.search(created.text)
    assert token, created.text
    assert f'value="http://units.test/feeds/{meta}.xml" readonly' in created.text
    assert f'value="http://units.test/feeds/{meta}.csv" readonly' in created.text
    assert f'id="feed-user" class="copy" value="{meta}" readonly' in created.text
    read = (await api.request("GET", f"/api/v2/channels/{meta}")).json()
    assert read["settings"] == {"urlTemplate": template}
    assert token.group(1).startswith(read["feedTokenPrefix"])
    listed = await client.get("/console/channels")
    assert token.group(1) not in listed.text  # shown that once

    await api.add_channel(
        meta, "meta-catalog", urlTemplate=template, propertyTypes={"villa": "house"}
    )
    other = "https://homes.example.com/v/{id}"
    replaced = await client.post("/console/channels", data={**form, "urlTemplate": other})
    assert replaced.status_code == 303  # no new token: it kept its kind
    read = (await api.request("GET", f"/api/v2/channels/{meta}")).json()
    assert read["settings"] == {"urlTemplate": other, "propertyTypes": {"villa": "house"}}

    rotated = await client.post(f"/console/channels/{meta}/rotate", data={"csrf": csrf_of(page)})
    assert rotated.status_code == 200
    again = TOKEN.search(rotated.text)
    assert again and again.group(1) != token.group(1)


async def test_a_bad_channel_is_named_beside_its_fields_in_both_languages(api: Api) -> None:
    client = await sign_in(api)
    page = await client.get("/console/channels")
    form = {"csrf": csrf_of(page), "name": unique("m"), "kind": "meta-catalog"}
    bad = await client.post("/console/channels", data={**form, "urlTemplate": "ftp://x/{id}"})
    assert bad.status_code == 422
    assert 'id="urlTemplate-error"' in bad.text and 'aria-invalid="true"' in bad.text
    assert 'value="ftp://x/{id}"' in bad.text  # what was typed comes back
    named = await client.post("/console/channels", data={**form, "name": "Not A Name"})
    assert named.status_code == 422 and 'id="name-error"' in named.text
    await arabic(client)
    blank = await client.post("/console/channels", data={**form, "name": ""})
    assert blank.status_code == 422
    assert '<span class="field-error" id="name-error" title="is required">أدخل الاسم' in (
        blank.text
    )
    assert "<h1>القنوات</h1>" in blank.text and "احفظ القناة" in blank.text


async def test_deleting_a_channel_asks_first_and_takes_its_name_off_units(api: Api) -> None:
    label = unique("gone")
    await api.add_channel(label)
    unit = await api.create_unit(**READY_UNIT)
    body = {"action": "publish", "channels": ["website", label]}
    path = f"/api/v2/units/publishing-actions/{unit['id']}"
    await api.request("PUT", path, json=body, headers={"if-match": '"1"'})
    client = await sign_in(api)
    ask = await client.get(f"/console/channels/{label}/delete")
    assert ask.status_code == 200
    assert f"Delete the channel {label}?" in ask.text
    assert "taken off every unit published to it (1)" in ask.text
    assert (await api.request("GET", f"/api/v2/channels/{label}")).status_code == 200
    await arabic(client)
    asked = await client.get(f"/console/channels/{label}/delete")
    assert f"حذف القناة {label}؟" in asked.text and "احذفها" in asked.text
    done = await client.post(f"/console/channels/{label}/delete", data={"csrf": csrf_of(ask)})
    assert done.status_code == 303 and done.headers["location"] == "/console/channels?done=deleted"
    assert "حُذفت القناة." in (await client.get("/console/channels?done=deleted")).text
    stored = (await api.request("GET", f"/api/v2/units/{unit['id']}")).json()
    assert stored["publishing"]["channels"] == ["website"]
    website = await client.post("/console/channels/website/delete", data={"csrf": csrf_of(ask)})
    assert website.status_code == 409


async def test_the_channels_page_is_for_admin_keys_only(api: Api) -> None:
    client = await sign_in(api, await api.create_key("units:read", "units:write"))
    page = await client.get("/console/units")
    assert 'href="/console/channels"' not in page.text
    assert (await client.get("/console/channels")).status_code == 403
    refused = await client.post(
        "/console/channels", data={"csrf": csrf_of(page), "name": unique("x"), "kind": "label"}
    )
    assert refused.status_code == 403
