"""API keys: authentication, scopes, the admin API, expiry, revocation, rate limits."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.conftest import REDIS_URL, Api, need_service, start_api, unit_body
from units_api.auth import repository
from units_api.auth.service import Authenticator
from units_api.config import Settings
from units_api.errors import Unauthorized


async def test_missing_malformed_and_unknown_keys_are_401(api: Api) -> None:
    for headers in (
        {},
        {"Authorization": "Basic abc"},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer uak_unknown"},
    ):
        response = await api.client.get("/api/v2/units/x", headers=headers)
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert response.headers["content-type"] == "application/problem+json"


async def test_scopes_are_enforced_with_403(api: Api) -> None:
    reader = await api.create_key("units:read")
    unit = await api.create_unit()
    assert (await api.request("GET", f"/api/v2/units/{unit['id']}", key=reader)).status_code == 200
    for method, path in (
        ("POST", "/api/v2/units/"),
        ("PATCH", f"/api/v2/units/{unit['id']}"),
        ("DELETE", f"/api/v2/units/{unit['id']}"),
        ("GET", "/api/v2/api-keys"),
    ):
        response = await api.request(method, path, key=reader, json=unit_body())
        assert response.status_code == 403, (method, path)
    writer = await api.create_key("units:write")
    assert (await api.request("GET", f"/api/v2/units/{unit['id']}", key=writer)).status_code == 403
    assert (
        await api.request("POST", "/api/v2/units", key=writer, json=unit_body())
    ).status_code == 201


async def test_admin_api_issues_lists_reads_and_revokes(api: Api) -> None:
    response = await api.request(
        "POST",
        "/api/v2/api-keys",
        json={
            "name": "website",
            "scopes": ["units:read"],
            "rateLimit": "600/minute",
            "expiresAt": "2099-01-01T00:00:00Z",
        },
    )
    assert response.status_code == 201
    created = response.json()
    secret = created["key"]
    assert secret.startswith("uak_") and len(secret) >= 40
    assert created["prefix"] == secret[:12]
    assert response.headers["location"] == f"/api/v2/api-keys/{created['id']}"
    record = (await api.request("GET", f"/api/v2/api-keys/{created['id']}")).json()
    assert "key" not in record
    assert set(record) == {
        "id",
        "name",
        "prefix",
        "scopes",
        "policy",
        "rateLimit",
        "expiresAt",
        "createdAt",
        "lastUsedAt",
        "revokedAt",
    }
    assert record["scopes"] == ["units:read"] and record["expiresAt"] == "2099-01-01T00:00:00.000Z"
    assert record["lastUsedAt"] is None

    assert (await api.request("GET", "/api/v2/units/x", key=secret)).status_code == 404
    used = (await api.request("GET", f"/api/v2/api-keys/{created['id']}")).json()
    assert used["lastUsedAt"] is not None

    listed: list[dict[str, Any]] = []
    cursor = None
    while True:
        params = {"limit": "200", **({"cursor": cursor} if cursor else {})}
        page = (await api.request("GET", "/api/v2/api-keys", params=params)).json()
        listed += page["data"]
        if (cursor := page["nextCursor"]) is None:
            break
    assert created["id"] in [key["id"] for key in listed]
    assert all("key" not in key for key in listed)

    assert (await api.request("DELETE", f"/api/v2/api-keys/{created['id']}")).status_code == 204
    assert (await api.request("GET", "/api/v2/units/x", key=secret)).status_code == 401
    revoked = (await api.request("GET", f"/api/v2/api-keys/{created['id']}")).json()
    assert revoked["revokedAt"] is not None
    missing = "01a20116-f7fc-74e7-86f8-34e3375af820"
    assert (await api.request("DELETE", f"/api/v2/api-keys/{missing}")).status_code == 404
    assert (await api.request("GET", "/api/v2/api-keys/nope")).status_code == 404


async def test_key_list_pages_with_cursor(api: Api) -> None:
    for _ in range(3):
        await api.create_key("units:read")
    ids: list[str] = []
    url = "/api/v2/api-keys?limit=2"
    while url:
        page = (await api.request("GET", url)).json()
        ids += [key["id"] for key in page["data"]]
        url = f"/api/v2/api-keys?limit=2&cursor={page['nextCursor']}" if page["nextCursor"] else ""
    assert len(ids) == len(set(ids)) >= 4
    assert (await api.request("GET", "/api/v2/api-keys?cursor=zzz")).status_code == 400


@pytest.mark.parametrize(
    "body",
    [
        {"name": "x", "scopes": []},
        {"name": "x", "scopes": ["units:fly"]},
        {"name": " ", "scopes": ["admin"]},
        {"name": "x", "scopes": ["admin"], "expiresAt": "2001-01-01T00:00:00Z"},
        {"name": "x", "scopes": ["admin"], "expiresAt": "tomorrow"},
        {"name": "x", "scopes": ["admin"], "rateLimit": "lots"},
        {"name": "x", "scopes": ["admin"], "extra": 1},
    ],
)
async def test_bad_key_requests_are_422(api: Api, body: dict[str, object]) -> None:
    response = await api.request("POST", "/api/v2/api-keys", json=body)
    assert response.status_code == 422
    assert response.json()["errors"]


async def test_expired_key_is_401(api: Api) -> None:
    soon = (datetime.now(UTC) + timedelta(seconds=1)).isoformat().replace("+00:00", "Z")
    secret = await api.create_key("units:read", expiresAt=soon)
    assert (await api.request("GET", "/api/v2/units/x", key=secret)).status_code == 404
    await asyncio.sleep(1.2)
    response = await api.request("GET", "/api/v2/units/x", key=secret)
    assert response.status_code == 401
    assert "expired" in response.json()["detail"]


async def test_per_key_rate_limit_answers_429_with_headers(api: Api) -> None:
    secret = await api.create_key("units:read", rateLimit="3/hour")
    statuses = []
    for _ in range(4):
        response = await api.request("GET", "/api/v2/units/x", key=secret)
        statuses.append(response.status_code)
    assert statuses == [404, 404, 404, 429]
    assert int(response.headers["retry-after"]) >= 1
    assert response.headers["ratelimit-policy"] == '"default";q=3;w=3600'
    assert response.headers["ratelimit"].startswith('"default";r=0;t=')


async def test_rate_limit_is_shared_through_redis(database_url: str) -> None:
    need_service(REDIS_URL, "redis")
    settings = Settings(database_url=database_url, access_log=False, redis_url=REDIS_URL)
    async for first in start_api(settings):
        secret = await first.create_key("units:read", rateLimit="4/hour")
        async for second in start_api(settings):
            statuses = [
                (await api.request("GET", "/api/v2/units/x", key=secret)).status_code
                for api in (first, second, first, second, first)
            ]
    assert statuses == [404, 404, 404, 404, 429]


async def test_a_stale_key_is_read_once_for_the_requests_that_find_it_so(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The requests that find a key's cached entry run out together wait for one read of it
    and each get its outcome; one that leaves does not take the read from the others."""
    reads: list[str] = []
    by_hash = repository.by_hash

    async def counted(conn: Any, digest: str) -> Any:
        reads.append(digest)
        return await by_hash(conn, digest)

    monkeypatch.setattr(repository, "by_hash", counted)
    authenticator = Authenticator(api.context.db, cache_seconds=0)  # every entry stale
    header = f"Bearer {api.admin_key}"

    principals = await asyncio.gather(*(authenticator.authenticate(header) for _ in range(20)))
    assert len(reads) == 1
    assert {principal.name for principal in principals} == {"test admin"}

    outcomes = await asyncio.gather(
        *(authenticator.authenticate("Bearer not-a-key") for _ in range(5)),
        return_exceptions=True,
    )
    assert len(reads) == 2
    assert all(isinstance(outcome, Unauthorized) for outcome in outcomes)

    left = asyncio.ensure_future(authenticator.authenticate(header))
    stays = asyncio.ensure_future(authenticator.authenticate(header))
    await asyncio.sleep(0)  # both wait for the one read
    left.cancel()
    assert (await stays).name == "test admin"
    with pytest.raises(asyncio.CancelledError):
        await left
    assert len(reads) == 3

    await authenticator.authenticate(header)  # stale again: read again
    assert len(reads) == 4


async def test_a_read_of_a_key_begun_before_it_was_revoked_keeps_nothing(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key revoked while a read of it is under way: the requests after the revocation read
    it afresh (a 401), and the read begun before leaves nothing for the next ones."""
    issued = await api.request(
        "POST", "/api/v2/api-keys", json={"name": "revoked mid-read", "scopes": ["units:read"]}
    )
    key = issued.json()
    header = f"Bearer {key['key']}"
    reads: list[str] = []
    read, held = asyncio.Event(), asyncio.Event()
    by_hash = repository.by_hash

    async def held_first(conn: Any, digest: str) -> Any:
        row = await by_hash(conn, digest)
        reads.append(digest)
        if len(reads) == 1:
            read.set()
            await held.wait()  # read, not yet kept
        return row

    monkeypatch.setattr(repository, "by_hash", held_first)
    authenticator = Authenticator(api.context.db, cache_seconds=60)
    before = asyncio.ensure_future(authenticator.authenticate(header))
    async with asyncio.timeout(10):
        await read.wait()
    revoked = await api.request("DELETE", f"/api/v2/api-keys/{key['id']}")
    assert revoked.status_code == 204
    authenticator.forget(uuid.UUID(key["id"]))  # as the revoking process's router does

    with pytest.raises(Unauthorized):
        await authenticator.authenticate(header)
    held.set()
    assert (await before).name == "revoked mid-read"  # it began before the revocation
    with pytest.raises(Unauthorized):
        await authenticator.authenticate(header)
