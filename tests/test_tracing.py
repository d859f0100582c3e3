"""Traces: spans of requests, statements, jobs and webhook deliveries, recorded by the SDK's
in-memory exporter; and nothing at all when tracing is not asked for."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from sqlalchemy import select

from tests.conftest import CLI, Api, start_api
from tests.webhooks.receiver import receiver
from units_api import tracing
from units_api.config import Settings
from units_api.events.tables import events
from units_api.preflight import check_tracing

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tracing.configure_for_exporter(exporter)
    try:
        yield exporter
    finally:
        tracing.shutdown()


@pytest.fixture
async def traced_api(spans: InMemorySpanExporter, settings: Settings) -> AsyncIterator[Api]:
    traced = settings.model_copy(
        update={"webhook_allow_private": True, "webhook_poll_seconds": 0.1}
    )
    async for api in start_api(traced):
        yield api


def _server_span(found: list[ReadableSpan], name: str, path: str) -> ReadableSpan:
    servers = [
        s
        for s in found
        if s.kind == SpanKind.SERVER
        and s.name == name
        and s.attributes is not None
        and s.attributes.get("url.path") == path
    ]
    assert len(servers) == 1, [
        (s.name, s.start_time, s.end_time, dict(s.attributes or {})) for s in servers
    ]
    return servers[0]


async def _until(
    exporter: InMemorySpanExporter, found: Callable[[ReadableSpan], bool], seconds: float = 30
) -> ReadableSpan:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for span in exporter.get_finished_spans():
            if found(span):
                return span
        await asyncio.sleep(0.1)
    raise AssertionError("no such span: " + repr([s.name for s in exporter.get_finished_spans()]))


async def test_a_request_is_a_server_span_with_its_statements_under_it(
    traced_api: Api, spans: InMemorySpanExporter
) -> None:
    unit = await traced_api.create_unit(city="Giza")
    spans.clear()
    path = f"/api/v2/units/{unit['id']}"
    response = await traced_api.request("GET", path, headers={"traceparent": TRACEPARENT})
    assert response.status_code == 200

    found = list(spans.get_finished_spans())
    server = _server_span(found, "GET /api/v2/units/{id}", path)
    attributes = server.attributes or {}
    assert attributes["http.route"] == "/api/v2/units/{id}"
    assert attributes["http.request.method"] == "GET"
    assert attributes["http.response.status_code"] == 200
    assert attributes["units_api.request_id"] == response.headers["x-request-id"]
    # The caller's trace goes on.
    assert server.context is not None and f"{server.context.trace_id:032x}" == TRACE_ID
    assert server.parent is not None and f"{server.parent.span_id:016x}" == PARENT_ID

    statements = [
        s for s in found if s.parent is not None and s.parent.span_id == server.context.span_id
    ]
    assert statements, [s.name for s in found]
    for statement in statements:
        assert statement.kind == SpanKind.CLIENT
        texts = statement.attributes or {}
        assert texts["db.system.name"] in ("sqlite", "postgresql")
        assert len(str(texts["db.query.text"])) <= tracing.MAX_STATEMENT_TEXT
        # Statements' parameters (the unit's id here) are never in a span.
        assert all(unit["id"] not in str(value) for value in texts.values())
        assert all(unit["id"].replace("-", "") not in str(value) for value in texts.values())
    assert any(s.name == "SELECT" for s in statements)


async def test_an_unknown_path_is_named_by_no_template(
    traced_api: Api, spans: InMemorySpanExporter
) -> None:
    path = f"/api/v2/nothing-{uuid.uuid4().hex}"
    response = await traced_api.request("GET", path)
    assert response.status_code == 404
    server = _server_span(list(spans.get_finished_spans()), "GET unmatched", path)
    assert (server.attributes or {})["http.response.status_code"] == 404
    assert server.parent is None


async def test_a_job_run_is_a_span(traced_api: Api, spans: InMemorySpanExporter) -> None:
    project = f"traced-{uuid.uuid4().hex[:8]}"
    await traced_api.create_unit(subProjectId=project)
    response = await traced_api.request(
        "POST",
        "/api/v2/units/exports",
        json={"format": "csv", "filter": f"subProjectId=={project}"},
    )
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]

    run = await _until(
        spans,
        lambda s: s.name == "job export" and (s.attributes or {}).get("units_api.job.id") == job_id,
    )
    attributes = run.attributes or {}
    assert attributes["units_api.job.kind"] == "export"
    assert attributes["units_api.job.status"] == "succeeded"
    assert attributes["units_api.job.attempt"] == 1


def _delivery_of(event_id: str, hook_id: str) -> Callable[[ReadableSpan], bool]:
    """The span of an event's delivery to this test's webhook (the database is shared: a
    webhook another test left may be sent the same event)."""

    def found(span: ReadableSpan) -> bool:
        attributes = span.attributes or {}
        return (
            span.name == "webhook delivery"
            and attributes.get("units_api.event.id") == event_id
            and attributes.get("units_api.webhook.id") == hook_id
        )

    return found


async def test_a_delivery_links_to_the_request_that_wrote_its_event(
    traced_api: Api, spans: InMemorySpanExporter
) -> None:
    async with receiver() as target:
        created = await traced_api.request(
            "POST", "/api/v2/webhooks", json={"url": target.url, "eventTypes": ["unit.created"]}
        )
        assert created.status_code == 201, created.text
        hook_id = created.json()["id"]
        try:
            unit = await traced_api.create_unit(city="Giza")
            await target.wait_for(lambda got: len(target.of(unit["id"])) == 1)
            event_id = target.of(unit["id"])[0].event["id"]
            delivery = await _until(spans, _delivery_of(event_id, hook_id))
        finally:
            await traced_api.request("DELETE", f"/api/v2/webhooks/{hook_id}")

    writer = _server_span(list(spans.get_finished_spans()), "POST /api/v2/units", "/api/v2/units/")
    assert writer.context is not None
    assert [link.context.span_id for link in delivery.links] == [writer.context.span_id]
    assert [link.context.trace_id for link in delivery.links] == [writer.context.trace_id]
    attributes = delivery.attributes or {}
    assert attributes["units_api.webhook.id"] == hook_id
    assert attributes["http.response.status_code"] == 200
    assert delivery.kind == SpanKind.CLIENT


async def test_a_delivery_sends_its_spans_traceparent(
    traced_api: Api, spans: InMemorySpanExporter
) -> None:
    async with receiver() as target:
        created = await traced_api.request(
            "POST", "/api/v2/webhooks", json={"url": target.url, "eventTypes": ["unit.created"]}
        )
        assert created.status_code == 201, created.text
        hook_id = created.json()["id"]
        try:
            unit = await traced_api.create_unit(city="Giza")
            await target.wait_for(lambda got: len(target.of(unit["id"])) == 1)
            (received,) = target.of(unit["id"])
            delivery = await _until(spans, _delivery_of(received.event["id"], hook_id))
        finally:
            await traced_api.request("DELETE", f"/api/v2/webhooks/{hook_id}")

    headers = {name.lower(): value for name, value in received.headers.items()}
    assert delivery.context is not None
    # The receiver continues the delivery's trace, under the delivery's own span.
    version, trace_id, span_id, flags = headers["traceparent"].split("-")
    assert (version, trace_id, span_id) == (
        "00",
        f"{delivery.context.trace_id:032x}",
        f"{delivery.context.span_id:016x}",
    )
    assert int(flags, 16) == delivery.context.trace_flags and delivery.context.trace_flags.sampled
    writer = _server_span(list(spans.get_finished_spans()), "POST /api/v2/units", "/api/v2/units/")
    assert writer.context is not None and writer.context.trace_id != delivery.context.trace_id


async def test_with_tracing_off_events_keep_no_trace_context(api: Api) -> None:
    assert not tracing.on
    unit = await api.create_unit(city="Giza")
    async with api.context.db.read() as conn:
        kept = (
            await conn.execute(
                select(events.c.trace_context).where(events.c.unit_id == uuid.UUID(unit["id"]))
            )
        ).all()
    assert kept == [(None,)]


async def test_a_traced_write_keeps_its_traceparent_with_its_event(
    traced_api: Api, spans: InMemorySpanExporter
) -> None:
    unit = await traced_api.create_unit(city="Giza")
    writer = _server_span(list(spans.get_finished_spans()), "POST /api/v2/units", "/api/v2/units/")
    assert writer.context is not None
    async with traced_api.context.db.read() as conn:
        kept = (
            await conn.execute(
                select(events.c.trace_context).where(events.c.unit_id == uuid.UUID(unit["id"]))
            )
        ).scalar_one()
    assert kept is not None
    assert kept.startswith(f"00-{writer.context.trace_id:032x}-{writer.context.span_id:016x}-")


def _environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(extra)
    return env


def test_with_tracing_off_the_tracing_sdk_is_never_imported(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import asyncio, sys
        import httpx
        from units_api.app import create_app
        from units_api.config import Settings
        from units_api.migrate import upgrade

        url = "sqlite:///{tmp_path / "off.db"}"
        upgrade(url)

        async def main():
            app = create_app(Settings(database_url=url, access_log=False, files_dir="{tmp_path}"))
            async with app.router.lifespan_context(app):
                transport = httpx.ASGITransport(app=app)
                async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
                    assert (await c.get("/healthz")).status_code == 200
                    assert (await c.get("/api/v2/units/x")).status_code == 401

        asyncio.run(main())
        from units_api import tracing
        # The tracing SDK and its exporters (redis-py loads the SDK's metrics part itself
        # when the SDK is installed: not the service's doing).
        loaded = [
            m for m in sys.modules
            if m.startswith(("opentelemetry.sdk.trace", "opentelemetry.exporter"))
        ]
        print("on" if tracing.on else "off", len(loaded))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["off", "0"]


def test_an_unknown_exporter_stops_start_up_with_one_line(tmp_path: Path) -> None:
    env = _environment(
        UNITS_API_DATABASE_URL=f"sqlite:///{tmp_path / 'bad.db'}",
        OTEL_TRACES_EXPORTER="nonesuch",
    )
    done = subprocess.run([*CLI, "migrate"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: OTEL_TRACES_EXPORTER: no exporter 'nonesuch' is installed"
    ]


@pytest.mark.parametrize(
    ("environ", "wanted"),
    [
        ({}, False),
        ({"OTEL_SERVICE_NAME": "units"}, False),
        ({"OTEL_TRACES_EXPORTER": "none"}, False),
        ({"OTEL_TRACES_EXPORTER": "console"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}, False),
    ],
)
def test_what_turns_traces_on(environ: dict[str, str], wanted: bool) -> None:
    assert tracing.wanted(environ) is wanted


def test_the_otlp_exporter_is_installed_with_the_extra() -> None:
    check_tracing({"OTEL_TRACES_EXPORTER": "otlp,console"})
    check_tracing({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})


async def test_every_kind_of_write_keeps_its_writers_traceparent(
    traced_api: Api, spans: InMemorySpanExporter
) -> None:
    unit = await traced_api.create_unit(city="Giza")
    path = f"/api/v2/units/{unit['id']}"
    patched = await traced_api.request("PATCH", path, json={"city": "Cairo"})
    assert patched.status_code == 200, patched.text
    deleted = await traced_api.request("DELETE", path)
    assert deleted.status_code == 204, deleted.text

    found = list(spans.get_finished_spans())
    writers = [
        _server_span(found, "POST /api/v2/units", "/api/v2/units/"),
        _server_span(found, "PATCH /api/v2/units/{id}", path),
        _server_span(found, "DELETE /api/v2/units/{id}", path),
    ]
    async with traced_api.context.db.read() as conn:
        kept = (
            await conn.execute(
                select(events.c.trace_context)
                .where(events.c.unit_id == uuid.UUID(unit["id"]))
                .order_by(events.c.version)
            )
        ).scalars()
        contexts = list(kept)
    assert [str(c).rsplit("-", 1)[0] for c in contexts] == [
        f"00-{w.context.trace_id:032x}-{w.context.span_id:016x}"
        for w in writers
        if w.context is not None
    ]


async def test_a_traced_bulk_update_keeps_its_traceparent(
    traced_api: Api, spans: InMemorySpanExporter
) -> None:
    project = f"traced-{uuid.uuid4().hex[:8]}"
    first = await traced_api.create_unit(subProjectId=project)
    second = await traced_api.create_unit(subProjectId=project)
    response = await traced_api.request(
        "PUT",
        "/api/v2/units/bulk/update",
        json={"filter": f"subProjectId=={project}", "patch": {"city": "Dubai"}},
    )
    assert response.status_code == 200, response.text
    writer = _server_span(
        list(spans.get_finished_spans()),
        "PUT /api/v2/units/bulk/update",
        "/api/v2/units/bulk/update",
    )
    assert writer.context is not None
    ids = [uuid.UUID(first["id"]), uuid.UUID(second["id"])]
    async with traced_api.context.db.read() as conn:
        kept = (
            await conn.execute(
                select(events.c.trace_context).where(
                    events.c.unit_id.in_(ids), events.c.type == "unit.updated"
                )
            )
        ).scalars()
        contexts = {str(c).rsplit("-", 1)[0] for c in kept}
    assert contexts == {f"00-{writer.context.trace_id:032x}-{writer.context.span_id:016x}"}
