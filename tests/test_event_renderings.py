"""An event has three renderings that must stay twins: PostgreSQL's, written in SQL
(`events/repository.py`: the feed's pages and webhook bodies), Python's (`events/render.py`:
SQLite, and a key with a policy), and the webhook test ping's (`webhooks/service.test`).
One event of each kind is made through the API and its renderings compared."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
from sqlalchemy import select

from tests.conftest import READY_UNIT, Api, start_api
from tests.webhooks.receiver import Received, receiver
from units_api.config import Settings
from units_api.events import repository
from units_api.events.render import render_event
from units_api.events.tables import event_positions, events
from units_api.events.types import TEST_EVENT_TYPE

UNITS = "/api/v2/units"
HOOKS = "/api/v2/webhooks"
TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
# The actions that make every unit event, in an order the state machines allow.
PUBLISHING = ("publish", "unpublish", "schedule", "archive", "restore")
AVAILABILITY = ("reserve", "release", "block", "unblock", "sell")


@pytest.fixture
async def api(database_url: str, files_dir: str) -> AsyncIterator[Api]:
    settings = Settings(
        database_url=database_url,
        files_dir=files_dir,
        access_log=False,
        db_pool_size=5,
        webhook_allow_private=True,
        webhook_poll_seconds=0.1,
        webhook_timeout_seconds=5,
    )
    async for instance in start_api(settings):
        yield instance


def _future() -> str:
    return (datetime.now(UTC) + timedelta(days=30)).isoformat().replace("+00:00", "Z")


async def _make_every_kind(api: Api, project: str) -> tuple[str, set[str]]:
    """A unit taken through every unit event, then deleted, an export of it, an import that
    succeeds (a dry run) and one that fails: the unit's id and the jobs'."""
    unit = await api.create_unit(**READY_UNIT, subProjectId=project)
    unit_id = unit["id"]
    patched = await api.request("PATCH", f"{UNITS}/{unit_id}", json={"name": "Renamed Villa"})
    assert patched.status_code == 200, patched.text
    for action in PUBLISHING:
        body: dict[str, Any] = {"action": action}
        if action == "schedule":
            body["at"] = _future()
        done = await api.request("PUT", f"{UNITS}/publishing-actions/{unit_id}", json=body)
        assert done.status_code == 200, (action, done.text)
    for action in AVAILABILITY:
        body = {"action": action}
        if action == "reserve":
            body["until"] = _future()
        done = await api.request("PUT", f"{UNITS}/availability-actions/{unit_id}", json=body)
        assert done.status_code == 200, (action, done.text)
    export = await api.request(
        "POST", f"{UNITS}/exports", json={"format": "jsonl", "filter": f"subProjectId=={project}"}
    )
    assert export.status_code == 202, export.text
    deleted = await api.request("DELETE", f"{UNITS}/{unit_id}")
    assert deleted.status_code == 204, deleted.text
    jobs = {export.json()["id"]}
    dry = orjson.dumps({"name": "Dry", "type": "villa", "subProjectId": project}) + b"\n"
    for name, content, fields in (
        ("dry.jsonl", dry, {"dryRun": "true"}),
        ("bad.csv", b"name,type,colour\nA,villa,red\n", {}),  # a header naming no field
    ):
        started = await api.request(
            "POST", f"{UNITS}/imports", files={"file": (name, content)}, data=fields
        )
        assert started.status_code == 202, started.text
        jobs.add(started.json()["id"])
    return unit_id, jobs


def _mine(got: list[Received], unit_id: str, jobs: set[str]) -> list[Received]:
    return [
        r
        for r in got
        if r.event.get("unitId") == unit_id or r.event.get("data", {}).get("id") in jobs
    ]


async def _feed(api: Api, after: int, ids: set[str], key: str | None = None) -> dict[str, Any]:
    """The feed's events with these ids, by id, read from just before the first of them."""
    found: dict[str, Any] = {}
    cursor = str(after)
    for _ in range(100):
        page = await api.request("GET", "/api/v2/events", params={"after": cursor}, key=key)
        assert page.status_code == 200, page.text
        body = page.json()
        found.update({e["id"]: e for e in body["data"] if e["id"] in ids})
        if not body["data"] or ids <= found.keys():
            break
        cursor = body["nextCursor"]
    return found


def _shape(value: Any) -> Any:
    """The keys and value types of an event (a JSON null as its own type)."""
    if isinstance(value, dict):
        return {key: _shape(item) for key, item in value.items()}
    return type(value).__name__


async def test_sql_python_and_webhook_renderings_agree(api: Api) -> None:
    project = uuid.uuid4().hex
    async with receiver() as target:
        hook = await api.request("POST", HOOKS, json={"url": target.url, "eventTypes": ["*"]})
        assert hook.status_code == 201, hook.text
        hook_id = hook.json()["id"]
        try:
            unit_id, jobs = await _make_every_kind(api, project)
            expected = 2 + len(PUBLISHING) + len(AVAILABILITY) + 1 + len(jobs)  # + delete
            got = await target.wait_for(lambda got: len(_mine(got, unit_id, jobs)) >= expected)
            delivered = {r.event["id"]: r for r in _mine(got, unit_id, jobs)}
            ping = await api.request("POST", f"{HOOKS}/{hook_id}/test")
            assert ping.status_code == 200 and ping.json()["statusCode"] == 200, ping.text
            (pinged,) = [r for r in target.received if r.event["type"] == TEST_EVENT_TYPE]
        finally:
            await api.request("DELETE", f"{HOOKS}/{hook_id}")

    assert len(delivered) == expected
    kinds = {r.event["type"] for r in delivered.values()}
    assert kinds == {
        "unit.created",
        "unit.updated",
        *(f"unit.{name}" for name in ("published", "unpublished", "scheduled", "archived")),
        *(f"unit.{name}" for name in ("restored", "reserved", "released", "blocked")),
        *(f"unit.{name}" for name in ("unblocked", "sold", "deleted")),
        "export.succeeded",
        "import.succeeded",
        "import.failed",
    }

    # The database's two renderings, byte for byte (PostgreSQL: SQL against Python).
    db = api.context.db
    ids = [uuid.UUID(event_id) for event_id in delivered]
    async with db.read() as conn:
        numbered = select(event_positions.c.pos).join_from(
            event_positions, events, events.c.seq == event_positions.c.seq
        )
        positions = [
            int(pos) for (pos,) in await conn.execute(numbered.where(events.c.id.in_(ids)))
        ]
        rendered = await repository.rendered_at(conn, positions)
        rows = await repository.at(conn, positions)
    assert len(positions) == expected
    assert rendered == {row.pos: render_event(row) for row in rows}
    # A webhook is sent the rendering itself.
    assert sorted(r.body for r in delivered.values()) == sorted(rendered.values())

    # The feed: rendered in SQL for the admin on PostgreSQL, in Python for a key with a
    # policy (and on SQLite); the same events either way, and the same as delivered.
    after = min(positions) - 1
    feed = await _feed(api, after, set(delivered))
    assert feed == {event_id: r.event for event_id, r in delivered.items()}
    scoped_key = await api.create_key("events:read", policy=f"subProjectId=={project}")
    unit_events = {i for i, r in delivered.items() if r.event["unitId"] == unit_id}
    scoped = await _feed(api, after, unit_events, key=scoped_key)
    assert scoped == {event_id: feed[event_id] for event_id in unit_events}

    # The test ping has an event's fields in the same order and of the same types.
    ping_event = pinged.event
    job_events = [e for e in feed.values() if e["unitId"] is None]
    assert len(job_events) == len(jobs)
    for event in feed.values():
        assert list(event) == list(ping_event)
        assert TIME.match(event["occurredAt"]) and TIME.match(ping_event["occurredAt"])
        assert uuid.UUID(event["id"]).version == uuid.UUID(ping_event["id"]).version == 7
        assert set(event["actor"]) == set(ping_event["actor"]) == {"type", "id", "name"}
        assert isinstance(event["data"], dict) and isinstance(ping_event["data"], dict)
    shape = _shape({**ping_event, "data": None, "actor": None})
    for job_event in job_events:
        assert _shape({**job_event, "data": None, "actor": None}) == shape
    for event in feed.values():
        if event["unitId"] is not None:
            assert isinstance(event["unitId"], str) and isinstance(event["version"], int)
    assert orjson.loads(pinged.body) == ping_event
