"""Every attempt of a delivery, the delivery log's filters, and test pings in the log."""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

import orjson
import pytest
from sqlalchemy import func, select

from tests.webhooks import test_webhooks
from tests.webhooks.receiver import Received, receiver
from tests.webhooks.test_webhooks import HOOKS, Hooks
from units_api.webhooks.sender import KEEP_AT_MOST
from units_api.webhooks.tables import webhook_delivery_attempts

hooks = test_webhooks.hooks  # the fixture: the API with the webhooks it deletes afterwards

# 1 + 2 * 1,500 bytes: the cut at 2,048 falls inside an "é", which is left out whole.
LONG_ANSWER = ("x" + "é" * 1500).encode()
CUT_ANSWER = "x" + "é" * ((KEEP_AT_MOST - 1) // 2)


async def _attempts(hooks: Hooks, hook_id: str, delivery_id: str) -> list[dict[str, Any]]:
    response = await hooks.api.request(
        "GET", f"{HOOKS}/{hook_id}/deliveries/{delivery_id}/attempts"
    )
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["data"]
    return found


async def _settled(hooks: Hooks, hook_id: str, query: str = "") -> list[dict[str, Any]]:
    """The delivery log once nothing in it is pending."""
    deadline = time.monotonic() + 15
    while True:
        response = await hooks.api.request("GET", f"{HOOKS}/{hook_id}/deliveries{query}")
        assert response.status_code == 200, response.text
        log: list[dict[str, Any]] = response.json()["data"]
        if log and all(d["status"] != "pending" for d in log):
            return log
        assert time.monotonic() < deadline, log


async def test_every_attempt_is_recorded_newest_first(
    hooks: Hooks, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="units_api.webhooks.worker")
    async with receiver() as target:
        target.reply = LONG_ANSWER

        def answer(received: Received) -> int:
            return 503 if not target.received else 200

        target.answer = answer
        hook = await hooks.create(target.url, eventTypes=["unit.created"])
        await hooks.api.create_unit()
        await target.wait_for(lambda got: len(got) == 2, seconds=30)
        (delivery,) = await _settled(hooks, hook["id"])
    assert delivery["status"] == "succeeded" and delivery["attempts"] == 2
    second, first = await _attempts(hooks, hook["id"], delivery["id"])
    assert first["statusCode"] == 503 and first["error"] == "answered 503"
    assert second["statusCode"] == 200 and second["error"] is None
    assert first["attemptedAt"] < second["attemptedAt"]
    for attempt in (first, second):
        assert isinstance(attempt["durationMs"], int) and attempt["durationMs"] >= 0
        assert attempt["responseBody"] == CUT_ANSWER
        assert set(attempt) == {"attemptedAt", "statusCode", "durationMs", "error", "responseBody"}
    assert len(CUT_ANSWER.encode()) == KEEP_AT_MOST - 1
    failures = [r for r in caplog.records if r.getMessage() == "webhook delivery attempt failed"]
    mine = [r for r in failures if r.__dict__.get("deliveryId") == delivery["id"]]
    assert len(mine) == 1
    logged = mine[0].__dict__
    assert logged["webhookId"] == hook["id"] and logged["eventId"] == delivery["eventId"]
    assert logged["attempt"] == 1 and logged["statusCode"] == 503
    assert hook["secret"] not in orjson.dumps(logged, default=str).decode()


async def test_attempts_of_an_unknown_delivery_or_another_webhooks_are_404s(
    hooks: Hooks,
) -> None:
    async with receiver() as target:
        mine = await hooks.create(target.url, eventTypes=["unit.created"])
        other = await hooks.create(target.url, eventTypes=["unit.created"])
        await hooks.api.create_unit()
        (delivery,) = await _settled(hooks, mine["id"])
    for path in (
        f"{HOOKS}/{other['id']}/deliveries/{delivery['id']}/attempts",
        f"{HOOKS}/{mine['id']}/deliveries/{uuid.uuid4()}/attempts",
        f"{HOOKS}/{uuid.uuid4()}/deliveries/{delivery['id']}/attempts",
    ):
        response = await hooks.api.request("GET", path)
        assert response.status_code == 404, (path, response.text)
        assert response.headers["content-type"] == "application/problem+json"
    key = await hooks.api.create_key("units:read")
    response = await hooks.api.request(
        "GET", f"{HOOKS}/{mine['id']}/deliveries/{delivery['id']}/attempts", key=key
    )
    assert response.status_code == 403


async def test_the_delivery_log_is_filtered_by_status_and_event_type(hooks: Hooks) -> None:
    async with receiver() as target:
        target.answer = lambda received: 410 if received.event["type"] == "unit.updated" else 200
        hook = await hooks.create(target.url, eventTypes=["unit.created", "unit.updated"])
        unit = await hooks.api.create_unit()
        await target.wait_for(lambda got: len(got) == 1)
        patched = await hooks.api.request(
            "PATCH", f"/api/v2/units/{unit['id']}", json={"city": "Cairo"}
        )
        assert patched.status_code == 200
        await target.wait_for(lambda got: len(got) == 2)
        log = await _settled(hooks, hook["id"])
    assert {(d["eventType"], d["status"]) for d in log} == {
        ("unit.created", "succeeded"),
        ("unit.updated", "failed"),
    }
    failed = await _settled(hooks, hook["id"], "?status=failed")
    assert [(d["eventType"], d["status"]) for d in failed] == [("unit.updated", "failed")]
    created = await _settled(hooks, hook["id"], "?eventType=unit.created&status=succeeded")
    assert [d["eventType"] for d in created] == ["unit.created"]
    response = await hooks.api.request("GET", f"{HOOKS}/{hook['id']}/deliveries?status=pending")
    assert response.status_code == 200 and response.json()["data"] == []
    for query, name in (("status=failing", "status"), ("eventType=unit.eaten", "eventType")):
        response = await hooks.api.request("GET", f"{HOOKS}/{hook['id']}/deliveries?{query}")
        assert response.status_code == 400, response.text
        assert response.json()["parameter"] == name
        assert query.split("=")[1] in response.json()["detail"]


async def test_test_pings_are_in_the_delivery_log_with_their_attempt(
    hooks: Hooks, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="units_api.webhooks.service")
    async with receiver() as target:
        target.answer = lambda received: 204
        hook = await hooks.create(target.url, eventTypes=["unit.sold"])
        response = await hooks.api.request("POST", f"{HOOKS}/{hook['id']}/test")
        assert response.status_code == 200, response.text
        (ping,) = target.received
    response = await hooks.api.request("POST", f"{HOOKS}/{hook['id']}/test")
    assert response.json()["statusCode"] is None
    failed, succeeded = await _settled(hooks, hook["id"], "?eventType=webhook.test")
    assert succeeded["eventId"] == ping.headers["webhook-id"] == ping.event["id"]
    assert (succeeded["status"], succeeded["attempts"], succeeded["lastStatusCode"]) == (
        "succeeded",
        1,
        204,
    )
    assert (failed["status"], failed["lastStatusCode"]) == ("failed", None)
    (attempt,) = await _attempts(hooks, hook["id"], succeeded["id"])
    assert attempt["statusCode"] == 204 and attempt["error"] is None
    (attempt,) = await _attempts(hooks, hook["id"], failed["id"])
    assert attempt["statusCode"] is None and attempt["error"]
    (logged,) = [r for r in caplog.records if r.__dict__.get("deliveryId") == failed["id"]]
    assert logged.__dict__["webhookId"] == hook["id"] and logged.__dict__["attempt"] == 1
    again = await hooks.api.request(
        "POST", f"{HOOKS}/{hook['id']}/deliveries/{succeeded['id']}/redeliver"
    )
    assert again.status_code == 410


async def test_attempts_go_with_their_deliveries(hooks: Hooks) -> None:
    async with receiver() as target:
        hook = await hooks.create(target.url, eventTypes=["unit.sold"])
        await hooks.api.request("POST", f"{HOOKS}/{hook['id']}/test")
    (ping,) = await _settled(hooks, hook["id"])
    delivery_id = uuid.UUID(ping["id"])
    query = select(func.count()).where(webhook_delivery_attempts.c.delivery_id == delivery_id)
    async with hooks.api.context.db.read() as conn:
        assert (await conn.execute(query)).scalar_one() == 1
    response = await hooks.api.request("DELETE", f"{HOOKS}/{hook['id']}")
    assert response.status_code == 204
    async with hooks.api.context.db.read() as conn:
        assert (await conn.execute(query)).scalar_one() == 0
