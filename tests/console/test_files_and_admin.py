"""The console's files and admin pages over HTTP, on both databases: an export started,
followed and downloaded; an import tried dry with its row errors, then run; webhooks and
keys with their secrets shown once; and who may see which page."""

from __future__ import annotations

import asyncio
import re
import uuid
from typing import Any

import httpx
import orjson

from tests.conftest import Api
from tests.console.test_pages import csrf_of, sign_in

JOB = re.compile(r"/console/(?:ex|im)ports/([0-9a-f-]{36})$")


async def every(api: Api, path: str) -> list[dict[str, Any]]:
    """Every item of a paged list, following its cursors."""
    found: list[dict[str, Any]] = []
    cursor = None
    while True:
        params = {"limit": 100, **({"cursor": cursor} if cursor else {})}
        page = (await api.request("GET", path, params=params)).json()
        found.extend(page["data"])
        if not (cursor := page["nextCursor"]):
            return found


async def job_page(client: httpx.AsyncClient, location: str) -> str:
    """The job's page once the job has ended."""
    for _ in range(300):
        page = await client.get(location)
        assert page.status_code == 200, page.text
        if "data-refresh" not in page.text:
            return page.text
        await asyncio.sleep(0.1)
    raise AssertionError(f"{location} did not finish")


async def test_an_export_is_started_followed_and_downloaded(api: Api) -> None:
    town = f"Export {uuid.uuid4().hex[:8]}"
    for number in range(3):
        await api.create_unit(name=f"Exported {number}", city=town)
    client = await sign_in(api)
    form = await client.get("/console/exports")
    started = await client.post(
        "/console/exports",
        data={"csrf": csrf_of(form), "format": "jsonl", "filter": f'city=="{town}"'},
    )
    assert started.status_code == 303
    location = started.headers["location"]
    assert JOB.search(location)
    page = await job_page(client, location)
    assert "status-succeeded" in page and f"{location}/file" in page
    assert town in page  # the filter it was asked for
    download = await client.get(f"{location}/file")
    assert download.status_code == 200
    assert download.headers["content-disposition"].startswith("attachment;")
    rows = [orjson.loads(line) for line in download.content.splitlines()]
    assert sorted(row["name"] for row in rows) == ["Exported 0", "Exported 1", "Exported 2"]
    listed = await client.get("/console/exports")
    assert location in listed.text


async def test_a_bad_export_request_is_shown_beside_its_field(api: Api) -> None:
    client = await sign_in(api)
    form = await client.get("/console/exports")
    answer = await client.post(
        "/console/exports",
        data={"csrf": csrf_of(form), "format": "xlsx", "compression": "gzip"},
    )
    assert answer.status_code == 422
    assert 'id="compression-error"' in answer.text
    assert '<option value="xlsx" selected>' in answer.text


async def test_an_import_is_tried_dry_then_run(api: Api) -> None:
    town = f"Import {uuid.uuid4().hex[:8]}"
    lines = [
        {"name": "Good One", "type": "villa", "city": town, "price": 10},
        {"name": "", "type": "villa", "city": town},
        {"name": "Good Two", "type": "flat", "city": town, "price": -1},
        {"name": "Good Three", "type": "flat", "city": town},
    ]
    content = b"\n".join(orjson.dumps(line) for line in lines)
    client = await sign_in(api)
    form = await client.get("/console/imports")
    token = csrf_of(form)
    files = {"file": ("units.jsonl", content, "application/octet-stream")}
    dry = await client.post(
        "/console/imports", data={"csrf": token, "mode": "create", "dryRun": "true"}, files=files
    )
    assert dry.status_code == 303, dry.text
    page = await job_page(client, dry.headers["location"])
    assert re.search(r'id="rows-created">2<', page)
    assert re.search(r'id="rows-failed">2<', page)
    assert '<td class="num">2</td><td dir="ltr">name</td>' in page
    assert '<td class="num">3</td><td dir="ltr">price</td>' in page
    listed = await api.request("GET", "/api/v2/units/", params={"p": f'city=="{town}"'})
    assert listed.json()["meta"]["total"] == 0
    real = await client.post(
        "/console/imports", data={"csrf": token, "mode": "create"}, files=files
    )
    page = await job_page(client, real.headers["location"])
    assert re.search(r'id="rows-created">2<', page)
    listed = await api.request("GET", "/api/v2/units/", params={"p": f'city=="{town}"'})
    assert listed.json()["meta"]["total"] == 2


async def test_an_import_without_a_file_says_so(api: Api) -> None:
    client = await sign_in(api)
    form = await client.get("/console/imports")
    answer = await client.post("/console/imports", data={"csrf": csrf_of(form), "mode": "create"})
    assert answer.status_code == 422
    assert "Choose a csv, jsonl or xlsx file" in answer.text


async def test_webhooks_show_their_secret_once_and_their_log(api: Api) -> None:
    url = f"https://hooks.example.com/units/{uuid.uuid4().hex[:8]}"
    client = await sign_in(api)
    form = await client.get("/console/webhooks")
    created = await client.post(
        "/console/webhooks",
        data={
            "csrf": csrf_of(form),
            "url": url,
            "eventTypes": ["unit.created", "unit.updated"],
        },
    )
    assert created.status_code == 201
    secret = re.search(r'<code class="secret" dir="ltr">(whsec_[^<]+)</code>', created.text)
    assert secret
    hooks = await every(api, "/api/v2/webhooks")
    hook = next(h for h in hooks if h["url"] == url)
    page = await client.get(f"/console/webhooks/{hook['id']}")
    assert page.status_code == 200 and secret.group(1) not in page.text
    rotated = await client.post(
        f"/console/webhooks/{hook['id']}/actions", data={"csrf": csrf_of(page), "action": "rotate"}
    )
    new_secret = re.search(r'<code class="secret" dir="ltr">(whsec_[^<]+)</code>', rotated.text)
    assert new_secret and new_secret.group(1) != secret.group(1)
    disabled = await client.post(
        f"/console/webhooks/{hook['id']}/actions", data={"csrf": csrf_of(page), "action": "disable"}
    )
    assert disabled.status_code == 303
    assert (await api.request("GET", f"/api/v2/webhooks/{hook['id']}")).json()["enabled"] is False
    bad = await client.post(
        "/console/webhooks",
        data={"csrf": csrf_of(page), "url": "ftp://nope", "eventTypes": ["no.such"]},
    )
    assert bad.status_code == 422
    assert 'id="url-error"' in bad.text and 'value="ftp://nope"' in bad.text


async def test_keys_are_issued_shown_once_and_revoked(api: Api) -> None:
    client = await sign_in(api)
    form = await client.get("/console/keys")
    issued = await client.post(
        "/console/keys",
        data={"csrf": csrf_of(form), "name": "Broker portal", "scopes": ["units:read"]},
    )
    assert issued.status_code == 201
    secret = re.search(r'<code class="secret" dir="ltr">(uak_[^<]+)</code>', issued.text)
    assert secret
    works = await api.request("GET", "/api/v2/units/", key=secret.group(1))
    assert works.status_code == 200
    keys = await every(api, "/api/v2/api-keys")
    key_id = next(k["id"] for k in keys if secret.group(1).startswith(k["prefix"]))
    page = await client.get("/console/keys")
    assert secret.group(1) not in page.text
    revoked = await client.post(f"/console/keys/{key_id}/revoke", data={"csrf": csrf_of(page)})
    assert revoked.status_code == 303
    api.context.authenticator.forget(uuid.UUID(key_id))
    refused = await api.request("GET", "/api/v2/units/", key=secret.group(1))
    assert refused.status_code == 401


async def test_admin_pages_are_for_admin_keys_only(api: Api) -> None:
    client = await sign_in(api, await api.create_key("units:read", "units:write"))
    page = await client.get("/console/units")
    assert "/console/webhooks" not in page.text and "/console/keys" not in page.text
    assert "/console/imports" in page.text and "/console/exports" not in page.text
    assert (await client.get("/console/webhooks")).status_code == 403
    assert (await client.get("/console/keys")).status_code == 403
    assert (await client.get("/console/exports")).status_code == 403
