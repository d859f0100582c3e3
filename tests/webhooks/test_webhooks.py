"""Webhooks end to end: the API, and deliveries to a real receiver on 127.0.0.1."""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from tests.conftest import Api, start_api
from tests.webhooks.receiver import receiver
from units_api.config import Settings
from units_api.webhooks.sender import Sender

HOOKS = "/api/v2/webhooks"
SCALE = 0.0001  # later retries: 0.03 s, 0.18 s, 0.72 s, 1.8 s, 3.6 s; 24 h: 8.6 s


class Hooks:
    """The API with webhooks it deletes afterwards (the database is shared)."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.created: list[str] = []

    async def create(self, url: str, **body: Any) -> dict[str, Any]:
        response = await self.api.request(
            "POST", HOOKS, json={"url": url, "eventTypes": ["*"], **body}
        )
        assert response.status_code == 201, response.text
        created: dict[str, Any] = response.json()
        self.created.append(created["id"])
        return created

    async def get(self, hook_id: str) -> dict[str, Any]:
        response = await self.api.request("GET", f"{HOOKS}/{hook_id}")
        assert response.status_code == 200, response.text
        found: dict[str, Any] = response.json()
        return found

    async def deliveries(self, hook_id: str) -> list[dict[str, Any]]:
        response = await self.api.request("GET", f"{HOOKS}/{hook_id}/deliveries?limit=200")
        assert response.status_code == 200, response.text
        found: list[dict[str, Any]] = response.json()["data"]
        return found


async def started(database_url: str, files_dir: str, scale: float) -> AsyncIterator[Hooks]:
    settings = Settings(
        database_url=database_url,
        files_dir=files_dir,
        access_log=False,
        db_pool_size=5,
        webhook_allow_private=True,
        webhook_time_scale=scale,
        webhook_poll_seconds=0.1,
        webhook_timeout_seconds=2,
    )
    async for api in start_api(settings):
        found = Hooks(api)
        yield found
        for hook_id in found.created:
            await api.request("DELETE", f"{HOOKS}/{hook_id}")


@pytest.fixture
async def hooks(database_url: str, files_dir: str) -> AsyncIterator[Hooks]:
    async for found in started(database_url, files_dir, SCALE):
        yield found


# Every retry on the schedule: the first retry waits 5 s unscaled, so the scaled 24 hours
# after which a failing webhook is disabled (8.6 s at SCALE) must outlast it and the next four
# by more than a busy machine's delays: 25.9 s here, the sixth attempt at 13.2 s.
RETRY_SCALE = 0.0003  # later retries: 0.09 s, 0.54 s, 2.2 s, 5.4 s, 10.8 s


@pytest.fixture
async def retrying_hooks(database_url: str, files_dir: str) -> AsyncIterator[Hooks]:
    async for found in started(database_url, files_dir, RETRY_SCALE):
        yield found


async def test_create_read_list_update_delete(hooks: Hooks) -> None:
    api = hooks.api
    created = await hooks.create(
        "https://crm.example.com/hooks", eventTypes=["unit.created"], description="CRM"
    )
    secret = created.pop("secret")
    assert secret.startswith("whsec_") and len(base64.b64decode(secret[6:])) == 32
    assert created["enabled"] is True and created["disabledReason"] is None
    assert created["eventTypes"] == ["unit.created"] and created["filter"] is None
    read = await hooks.get(created["id"])
    assert read == created and "secret" not in read
    listed = await api.request("GET", HOOKS, params={"limit": 200})
    assert created["id"] in [hook["id"] for hook in listed.json()["data"]]

    patched = await api.request(
        "PATCH",
        f"{HOOKS}/{created['id']}",
        json={"eventTypes": ["unit.sold"], "filter": "city==Giza", "description": None},
    )
    assert patched.status_code == 200, patched.text
    body = patched.json()
    assert (body["eventTypes"], body["filter"], body["description"]) == (
        ["unit.sold"],
        "city==Giza",
        None,
    )
    assert body["url"] == "https://crm.example.com/hooks"

    deleted = await api.request("DELETE", f"{HOOKS}/{created['id']}")
    assert deleted.status_code == 204
    assert (await api.request("GET", f"{HOOKS}/{created['id']}")).status_code == 404
    assert (await api.request("GET", f"{HOOKS}/{uuid.uuid4()}/deliveries")).status_code == 404


async def test_a_given_secret_is_kept(hooks: Hooks) -> None:
    secret = "whsec_" + base64.b64encode(b"k" * 32).decode()
    created = await hooks.create("https://crm.example.com/h", secret=secret)
    assert created["secret"] == secret


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"url": "https://x.example.com", "eventTypes": []}, "eventTypes"),
        ({"url": "https://x.example.com", "eventTypes": ["unit.exploded"]}, "eventTypes"),
        ({"url": "ftp://x.example.com", "eventTypes": ["*"]}, "url"),
        ({"url": "https://u:p@x.example.com", "eventTypes": ["*"]}, "url"),
        ({"url": "https://x.example.com", "eventTypes": ["*"], "secret": "abc"}, "secret"),
        ({"url": "https://x.example.com", "eventTypes": ["*"], "filter": "nope=="}, "filter"),
        ({"url": "https://x.example.com", "eventTypes": ["*"], "filter": "bogus==1"}, "filter"),
        ({"url": "https://x.example.com", "eventTypes": ["*"], "extra": 1}, "extra"),
        ({"eventTypes": ["*"]}, "url"),
    ],
)
async def test_bad_webhooks_are_422s(hooks: Hooks, body: dict[str, Any], field: str) -> None:
    response = await hooks.api.request("POST", HOOKS, json=body)
    assert response.status_code == 422, response.text
    assert field in [error["field"] for error in response.json()["errors"]]


async def test_null_for_a_required_field_is_a_422(hooks: Hooks) -> None:
    created = await hooks.create("https://crm.example.com/h")
    response = await hooks.api.request("PATCH", f"{HOOKS}/{created['id']}", json={"url": None})
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "url"


async def test_deliveries_are_signed_and_logged(hooks: Hooks) -> None:
    async with receiver() as target:
        hook = await hooks.create(target.url, eventTypes=["unit.created", "unit.updated"])
        unit = await hooks.api.create_unit(city="Giza")
        patched = await hooks.api.request(
            "PATCH", f"/api/v2/units/{unit['id']}", json={"city": "Cairo"}
        )
        assert patched.status_code == 200
        await target.wait_for(
            lambda got: len([r for r in got if r.event["unitId"] == unit["id"]]) == 2
        )
        created, updated = sorted(target.of(unit["id"]), key=lambda r: r.event["version"])
        event = created.verify(hook["secret"])
        assert event["type"] == "unit.created" and event["data"]["unit"] == unit
        assert created.headers["webhook-id"] == event["id"]
        assert created.headers["Content-Type"] == "application/json"
        assert "traceparent" not in {name.lower() for name in created.headers}  # traces off
        assert updated.verify(hook["secret"])["data"]["changes"] == {
            "city": {"from": "Giza", "to": "Cairo"}
        }
        with pytest.raises(WebhookVerificationError):
            created.verify("whsec_" + base64.b64encode(b"x" * 32).decode())
        feed = await hooks.api.request("GET", "/api/v2/events", params={"types": "unit.created"})
        assert feed.status_code == 200

        log: list[dict[str, Any]] = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            log = await hooks.deliveries(hook["id"])
            if len(log) >= 2 and all(d["status"] == "succeeded" for d in log):
                break
        mine = [d for d in log if d["eventId"] in (event["id"], updated.event["id"])]
        assert [d["eventType"] for d in mine] == ["unit.updated", "unit.created"]  # newest first
        assert all(d["attempts"] == 1 and d["lastStatusCode"] == 200 for d in mine)
        assert all(d["nextAttemptAt"] is None and d["lastError"] is None for d in mine)
        assert mine[0]["lastResponse"] == "ok"


async def test_only_the_chosen_types_and_matching_units_are_delivered(hooks: Hooks) -> None:
    async with receiver() as target:
        project = uuid.uuid4().hex
        await hooks.create(
            target.url, eventTypes=["unit.created"], filter=f"subProjectId=={project};city==Giza"
        )
        giza = await hooks.api.create_unit(subProjectId=project, city="Giza")
        cairo = await hooks.api.create_unit(subProjectId=project, city="Cairo")
        await hooks.api.request("PATCH", f"/api/v2/units/{giza['id']}", json={"name": "New"})
        last = await hooks.api.create_unit(subProjectId=project, city="Giza")
        await target.wait_for(lambda got: any(r.event["unitId"] == last["id"] for r in got))
        assert [r.event["type"] for r in target.of(giza["id"])] == ["unit.created"]
        assert target.of(cairo["id"]) == []


async def test_a_jobs_end_reaches_webhooks_that_ask_for_it(hooks: Hooks) -> None:
    async with receiver() as target:
        hook = await hooks.create(target.url, eventTypes=["export.succeeded"])
        filtered = await hooks.create(target.url + "?filtered", filter="city==Giza")
        response = await hooks.api.request(
            "POST", "/api/v2/units/exports", json={"format": "csv", "filter": "city==Nowhere"}
        )
        assert response.status_code == 202
        job_id = response.json()["id"]
        await hooks.api.create_unit(city="Giza")  # the filtered webhook's, sent after the job's
        got = await target.wait_for(
            lambda got: any(r.event.get("data", {}).get("id") == job_id for r in got)
        )
        (ended,) = [r for r in got if r.event.get("data", {}).get("id") == job_id]
        event = ended.verify(hook["secret"])
        assert event["type"] == "export.succeeded" and event["unitId"] is None
        assert event["data"]["status"] == "succeeded" and event["data"]["rowCount"] == 0
        # A webhook with a filter judges units: a job has none, so it is not sent there.
        assert all(
            d["eventType"] != "export.succeeded" for d in await hooks.deliveries(filtered["id"])
        )


async def test_a_failed_delivery_is_retried_after_about_5_s_then_on_the_schedule(
    retrying_hooks: Hooks,
) -> None:
    hooks = retrying_hooks
    async with receiver() as target:
        target.answer = lambda received: 503
        hook = await hooks.create(target.url, eventTypes=["unit.created"])
        unit = await hooks.api.create_unit()
        got = await target.wait_for(lambda got: len(got) >= 7, seconds=60)
        attempts = [r for r in got if r.event["unitId"] == unit["id"]]
        assert len({r.headers["webhook-id"] for r in attempts}) == 1
        # The first retry in real time; the later ones on the scaled schedule.
        assert attempts[1].at - attempts[0].at >= 4.5
        for received in attempts:
            received.verify(hook["secret"])
        log = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            log = await hooks.deliveries(hook["id"])
            if log and log[0]["status"] == "failed":
                break
        assert log[0]["status"] == "failed" and log[0]["attempts"] == 7
        assert log[0]["lastStatusCode"] == 503 and log[0]["nextAttemptAt"] is None
        assert len(attempts) == 7


async def test_a_retry_honours_a_longer_retry_after(hooks: Hooks) -> None:
    async with receiver() as target:
        target.answer = lambda received: (
            (429, {"Retry-After": "7"}) if len(target.received) == 0 else 200
        )
        await hooks.create(target.url, eventTypes=["unit.created"])
        await hooks.api.create_unit()
        got = await target.wait_for(lambda got: len(got) >= 2, seconds=30)
        assert got[1].at - got[0].at >= 6.3


async def test_a_410_disables_the_webhook_until_it_is_enabled_again(hooks: Hooks) -> None:
    async with receiver() as target:
        target.answer = lambda received: 410
        hook = await hooks.create(target.url, eventTypes=["unit.created"])
        await hooks.api.create_unit()
        await target.wait_for(lambda got: len(got) >= 1)
        disabled: dict[str, Any] = {}
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            disabled = await hooks.get(hook["id"])
            if not disabled["enabled"]:
                break
        assert disabled["enabled"] is False and "410" in disabled["disabledReason"]
        missed = await hooks.api.create_unit()
        target.answer = lambda received: 200
        enabled = await hooks.api.request("PATCH", f"{HOOKS}/{hook['id']}", json={"enabled": True})
        assert enabled.status_code == 200 and enabled.json()["disabledReason"] is None
        after = await hooks.api.create_unit()
        await target.wait_for(lambda got: any(r.event["unitId"] == after["id"] for r in got))
        assert target.of(missed["id"]) == []


async def test_a_webhook_failing_every_delivery_for_24_hours_is_disabled(hooks: Hooks) -> None:
    async with receiver() as target:
        target.answer = lambda received: 500
        hook = await hooks.create(target.url, eventTypes=["unit.created"])
        await hooks.api.create_unit()
        found: dict[str, Any] = {}
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            found = await hooks.get(hook["id"])
            if not found["enabled"]:
                break
            await target.wait_for(lambda got: True)
            await hooks.api.create_unit()
            import asyncio

            await asyncio.sleep(1)
        assert found["enabled"] is False and "24 hours" in found["disabledReason"]


async def test_after_a_rotation_both_secrets_sign_every_delivery(hooks: Hooks) -> None:
    async with receiver() as target:
        hook = await hooks.create(target.url, eventTypes=["unit.created"])
        rotated = await hooks.api.request("POST", f"{HOOKS}/{hook['id']}/rotate-secret")
        assert rotated.status_code == 200
        new_secret = rotated.json()["secret"]
        assert new_secret != hook["secret"] and new_secret.startswith("whsec_")
        assert (await hooks.get(hook["id"])) == {
            k: v for k, v in rotated.json().items() if k != "secret"
        }
        unit = await hooks.api.create_unit()
        (got,) = await target.wait_for(lambda got: len(got) == 1)
        assert len(got.headers["webhook-signature"].split(" ")) == 2
        assert got.verify(hook["secret"])["unitId"] == unit["id"]
        assert got.verify(new_secret)["unitId"] == unit["id"]


async def test_redeliver_sends_the_same_event_again(hooks: Hooks) -> None:
    async with receiver() as target:
        hook = await hooks.create(target.url, eventTypes=["unit.created"])
        await hooks.api.create_unit()
        (first,) = await target.wait_for(lambda got: len(got) == 1)
        log = await hooks.deliveries(hook["id"])
        response = await hooks.api.request(
            "POST", f"{HOOKS}/{hook['id']}/deliveries/{log[0]['id']}/redeliver"
        )
        assert response.status_code == 202, response.text
        assert response.json()["eventId"] == log[0]["eventId"]
        assert response.json()["status"] == "pending"
        got = await target.wait_for(lambda got: len(got) == 2)
        assert got[1].headers["webhook-id"] == first.headers["webhook-id"]
        assert got[1].verify(hook["secret"]) == first.verify(hook["secret"])
        missing = await hooks.api.request(
            "POST", f"{HOOKS}/{hook['id']}/deliveries/{uuid.uuid4()}/redeliver"
        )
        assert missing.status_code == 404


async def test_a_test_ping_is_signed_and_answers_the_receivers_status(hooks: Hooks) -> None:
    async with receiver() as target:
        target.answer = lambda received: 204
        hook = await hooks.create(target.url, eventTypes=["unit.sold"])
        response = await hooks.api.request("POST", f"{HOOKS}/{hook['id']}/test")
        assert response.status_code == 200, response.text
        result = response.json()
        assert result["statusCode"] == 204 and result["error"] is None
        assert isinstance(result["durationMs"], int)
        (ping,) = target.received
        assert ping.verify(hook["secret"])["type"] == "webhook.test"
    # The receiver is gone: no answer.
    response = await hooks.api.request("POST", f"{HOOKS}/{hook['id']}/test")
    assert response.json()["statusCode"] is None and response.json()["error"]


async def test_webhooks_need_the_admin_scope(hooks: Hooks) -> None:
    key = await hooks.api.create_key("units:read", "events:read")
    assert (await hooks.api.request("GET", HOOKS, key=key)).status_code == 403


# --- SSRF -------------------------------------------------------------------------------

PRIVATE_TARGETS = [
    "http://127.0.0.1:9/h",
    "http://[::1]:9/h",
    "http://[::ffff:127.0.0.1]:9/h",
    "http://[::127.0.0.1]:9/h",
    "http://[64:ff9b::7f00:1]:9/h",
    "http://[2002:7f00:1::]:9/h",
    "http://[::ffff:0:7f00:1]:9/h",
    "http://10.1.2.3/h",
    "http://169.254.169.254/latest/meta-data",
    "http://localhost:9/h",
    "http://LOCALHOST./h",
]


@pytest.mark.parametrize("url", PRIVATE_TARGETS)
async def test_private_targets_are_refused_without_the_flag(api: Api, url: str) -> None:
    response = await api.request("POST", HOOKS, json={"url": url, "eventTypes": ["*"]})
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["field"] == "url"


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:9/h", "http://[::ffff:127.0.0.1]:9/h", "http://localhost:9/h"]
)
async def test_a_send_to_a_private_address_fails_without_connecting(url: str) -> None:
    async with receiver() as target:
        port = target.url.split(":")[2].split("/")[0]
        url = url.replace(":9/", f":{port}/")
        sender = Sender(timeout=2, allow_private=False)
        try:
            attempt = await sender.send(
                url, ["whsec_" + base64.b64encode(b"k" * 32).decode()], "m", b"{}"
            )
        finally:
            await sender.close()
        assert attempt.status_code is None and attempt.error and "refused" in attempt.error
        assert "UNITS_API_WEBHOOK_ALLOW_PRIVATE=true" in attempt.error
        assert target.received == []


def test_signatures_verify_with_the_standard_library() -> None:
    from datetime import UTC, datetime

    from units_api.webhooks.sender import sign

    secrets = ["whsec_" + base64.b64encode(bytes([i]) * 32).decode() for i in (1, 2)]
    now = datetime.now(UTC)
    header = sign(secrets, "msg_1", now, b'{"a":1}')
    headers = {
        "webhook-id": "msg_1",
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": header,
    }
    for secret in secrets:
        assert Webhook(secret).verify(b'{"a":1}', headers) == {"a": 1}


async def test_the_resolver_refuses_a_name_resolving_to_loopback_and_returns_what_it_checked() -> (
    None
):
    from units_api.webhooks.guard import GuardedResolver, UnsafeTarget, is_public, literal

    resolver = GuardedResolver()
    try:
        with pytest.raises(UnsafeTarget):
            await resolver.resolve("localhost", 80)
    finally:
        await resolver.close()
    assert not is_public(literal("::ffff:10.0.0.1"))  # type: ignore[arg-type]
    assert is_public(literal("93.184.216.34"))  # type: ignore[arg-type]
