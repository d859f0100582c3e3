"""Traces (OpenTelemetry), when the environment asks for them.

Tracing is on when the OpenTelemetry SDK is installed (`pip install 'units-api[otel]'`) and
`OTEL_TRACES_EXPORTER` names an exporter (not `none`) or an OTLP endpoint is set
(`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), unless
`OTEL_SDK_DISABLED=true`. The SDK reads the rest of the standard variables itself
(`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`, `OTEL_BSP_*`,
`OTEL_EXPORTER_OTLP_*`, `OTEL_PROPAGATORS`).

Spans: each HTTP request (a server span named by method and route template, continuing an
incoming `traceparent`), each database statement under one of the others (its text cut to
`MAX_STATEMENT_TEXT`, never its parameters), each job run (in the supervising process, and
the body in the job's own process) and each webhook delivery attempt, linked to the span of
the request or job that wrote its event (the event keeps that span's `traceparent`); the
attempt's request carries the attempt span's own `traceparent`, for the receiver to continue.

Off, the service loads nothing of the SDK: code on a request's path checks `tracing.on`, and
the request and statement hooks are not installed at all.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter
    from sqlalchemy.ext.asyncio import AsyncEngine

# Is tracing on in this process (`configure`)? Read as `tracing.on`, never imported by name.
on = False
_tracer: Any = None
_provider: Any = None

INSTRUMENTATION = "units_api"
# A statement's text in its span is cut to this many characters.
MAX_STATEMENT_TEXT = 2000
EXPORTER = "OTEL_TRACES_EXPORTER"
ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def wanted(environ: Mapping[str, str] = os.environ) -> bool:
    """Does the environment ask for traces?"""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = environ.get(EXPORTER)
    if exporters is not None and exporters.strip():
        return _exporter_names(exporters) != []
    return any(environ.get(name, "").strip() for name in ENDPOINTS)


def _exporter_names(value: str) -> list[str]:
    names = [name.strip().lower() for name in value.split(",") if name.strip()]
    return [name for name in names if name != "none"]


def exporter_entries(environ: Mapping[str, str]) -> list[tuple[str, str]]:
    """Each exporter the environment names, with the SDK's entry point name for it."""
    names = _exporter_names(environ.get(EXPORTER) or "otlp")
    return [(name, _exporter_entry_name(name, environ)) for name in names]


def _exporter_entry_name(name: str, environ: Mapping[str, str]) -> str:
    """The SDK's entry point name for an `OTEL_TRACES_EXPORTER` value: `otlp` by the OTLP
    protocol (http/protobuf unless grpc is asked for)."""
    if name != "otlp":
        return name
    protocol = environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or environ.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"
    )
    return "otlp_proto_grpc" if protocol.strip().lower() == "grpc" else "otlp_proto_http"


def _exporters(environ: Mapping[str, str]) -> list[SpanExporter]:
    """The exporters the environment names, as the SDK's packages register them; a name no
    installed package provides is a SettingError."""
    from importlib.metadata import entry_points

    from units_api.errors import SettingError

    found: list[SpanExporter] = []
    for name, entry in exporter_entries(environ):
        points = list(entry_points(group="opentelemetry_traces_exporter", name=entry))
        if not points:
            hint = (
                "install units-api[otel]"
                if entry == "otlp_proto_http"
                else "install the package that provides it"
            )
            raise SettingError(EXPORTER, f"{EXPORTER}: no exporter {name!r} is installed; {hint}")
        found.append(points[0].load()())
    return found


def tracer() -> Any:
    """The process's tracer, once `configure` has turned tracing on."""
    return _tracer


def configure_from_environment() -> bool:
    """Turn tracing on if the environment asks for it (once per process); whether it is on."""
    if on or not wanted():
        return on
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    configure([BatchSpanProcessor(exporter) for exporter in _exporters(os.environ)])
    return True


def configure_for_exporter(exporter: SpanExporter) -> None:
    """Turn tracing on with every span handed to `exporter` as it ends (an in-memory one in
    tests, for instance)."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    configure([SimpleSpanProcessor(exporter)])


def configure(processors: Iterable[Any]) -> None:
    """Turn tracing on in this process with these span processors, replacing any earlier
    configuration. The process-wide tracer provider is set the first time."""
    global on, _tracer, _provider
    from opentelemetry import trace
    from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
    from opentelemetry.sdk.trace import TracerProvider

    shutdown()
    resource = Resource.create()  # OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
    named = str(resource.attributes.get(SERVICE_NAME, ""))
    if not named or named.startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: "units-api"}))
    resource = resource.merge(Resource({SERVICE_VERSION: _version()}))
    provider = TracerProvider(resource=resource)
    for processor in processors:
        provider.add_span_processor(processor)
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        trace.set_tracer_provider(provider)
    _provider = provider
    _tracer = provider.get_tracer(INSTRUMENTATION, _version())
    on = True


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("units-api")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree
        return "0"


def flush() -> None:
    """Send the spans that have ended (a server's shutdown)."""
    if _provider is not None:
        _provider.force_flush()


def shutdown() -> None:
    """Send what is left and turn tracing off in this process (a job's process, before it
    exits: it runs no exit handlers)."""
    global on, _tracer, _provider
    provider, _provider, _tracer, on = _provider, None, None, False
    if provider is not None:
        provider.shutdown()


# --- context -------------------------------------------------------------------------------


def traceparent() -> str | None:
    """The current span's W3C traceparent, to keep with what it writes (an event)."""
    if not on:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    return carrier.get("traceparent")


def _context_of(parent: str | None) -> Any:
    """The context a stored traceparent stands for (an empty one for None)."""
    from opentelemetry.context import Context
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    if not parent:
        return Context()
    return TraceContextTextMapPropagator().extract({"traceparent": parent})


def _link_to(parent: str | None) -> list[Any]:
    from opentelemetry import trace
    from opentelemetry.trace import Link

    if not parent:
        return []
    span_context = trace.get_current_span(_context_of(parent)).get_span_context()
    return [Link(span_context)] if span_context.is_valid else []


# --- database statements -------------------------------------------------------------------

_SPAN = "_units_api_span"


def _operation(statement: str) -> str:
    words = statement.lstrip(" (\n").split(None, 1)
    return words[0].rstrip(";").upper() if words else "SQL"


def _statement_attributes(system: str, namespace: str | None, statement: str) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "db.system.name": system,
        "db.operation.name": _operation(statement),
        "db.query.text": statement[:MAX_STATEMENT_TEXT],
    }
    if namespace:
        attributes["db.namespace"] = namespace
    return attributes


def instrument_engine(engine: AsyncEngine) -> None:
    """A span per statement SQLAlchemy runs on `engine` (its text, never its parameters); on
    PostgreSQL the statements run on the driver directly too (`add_query_logger`).

    Statements are spans only under another (a request, a job, a delivery): the background
    loops' polls would otherwise each be a trace of their own, several a second."""
    from opentelemetry.trace import SpanKind, StatusCode, get_current_span
    from sqlalchemy import event

    sync = engine.sync_engine
    postgres = engine.dialect.name == "postgresql"
    system = "postgresql" if postgres else "sqlite"
    namespace = engine.url.database

    def before(
        conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool
    ) -> None:
        # asyncpg logs an executemany itself (see `log_driver_queries`)
        if not on or context is None or (postgres and many):
            return
        if not get_current_span().is_recording():  # a background loop's poll, say
            return
        attributes = _statement_attributes(system, namespace, statement)
        span = _tracer.start_span(
            attributes["db.operation.name"], kind=SpanKind.CLIENT, attributes=attributes
        )
        setattr(context, _SPAN, span)

    def after(
        conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool
    ) -> None:
        span = getattr(context, _SPAN, None)
        if span is not None:
            span.end()
            setattr(context, _SPAN, None)

    def failed(exception_context: Any) -> None:
        span = getattr(exception_context.execution_context, _SPAN, None)
        if span is not None:
            error = exception_context.original_exception
            span.set_status(StatusCode.ERROR, type(error).__name__)
            span.set_attribute("error.type", type(error).__name__)
            span.end()
            setattr(exception_context.execution_context, _SPAN, None)

    event.listen(sync, "before_cursor_execute", before)
    event.listen(sync, "after_cursor_execute", after)
    event.listen(sync, "handle_error", failed)
    if postgres:

        def connected(dbapi_connection: Any, record: Any) -> None:
            log_driver_queries(record.driver_connection, namespace)

        event.listen(sync, "connect", connected)


def log_driver_queries(connection: Any, namespace: str | None) -> None:
    """A span per statement run on an asyncpg connection outside SQLAlchemy (the fast pool,
    `db.driver_connection`), made when it has run (asyncpg reports it with its duration, in
    the context it ran in). Statements SQLAlchemy prepares are not reported here."""

    def logged(record: Any) -> None:
        if not on:
            return
        from opentelemetry.trace import SpanKind, StatusCode, get_current_span

        if not get_current_span().is_recording():
            return

        ended = time.time_ns()
        attributes = _statement_attributes("postgresql", namespace, record.query)
        span = _tracer.start_span(
            attributes["db.operation.name"],
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=ended - int(record.elapsed * 1e9),
        )
        if record.exception is not None:
            name = type(record.exception).__name__
            span.set_status(StatusCode.ERROR, name)
            span.set_attribute("error.type", name)
        span.end(end_time=ended)

    connection.add_query_logger(logged)


async def init_driver_connection(connection: Any) -> None:
    """The fast pool's `init`: its connections' statements become spans."""
    log_driver_queries(connection, None)


# --- jobs and deliveries -------------------------------------------------------------------


@dataclass(slots=True)
class Traced:
    """A span under way (None when tracing is off), for what is learnt while it runs."""

    span: Any = None

    @property
    def traceparent(self) -> str | None:
        """The span's W3C traceparent, for a process that continues it."""
        if self.span is None:
            return None
        from opentelemetry import trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        carrier: dict[str, str] = {}
        TraceContextTextMapPropagator().inject(carrier, trace.set_span_in_context(self.span))
        return carrier.get("traceparent")

    def set(self, **attributes: Any) -> None:
        if self.span is not None:
            for name, value in attributes.items():
                if value is not None:
                    self.span.set_attribute(name, value)

    def fail(self, error: str) -> None:
        if self.span is not None:
            from opentelemetry.trace import StatusCode

            self.span.set_status(StatusCode.ERROR, error[:200])


@contextmanager
def _span(
    name: str, parent: Any, links: list[Any], kind: str, **attributes: Any
) -> Iterator[Traced]:
    from opentelemetry.trace import SpanKind

    with _tracer.start_as_current_span(
        name,
        context=parent,
        kind=getattr(SpanKind, kind),
        links=links,
        attributes={k: v for k, v in attributes.items() if v is not None},
    ) as span:
        yield Traced(span)


@contextmanager
def job_run(kind: str, job_id: str, attempt: int) -> Iterator[Traced]:
    """A job's run, as the process that supervises it sees it (a root span)."""
    if not on:
        yield Traced()
        return
    with _span(
        f"job {kind}", _context_of(None), [], "CONSUMER", **_job(kind, job_id, attempt)
    ) as traced:
        yield traced


@contextmanager
def job_body(kind: str, job_id: str, attempt: int, parent: str | None) -> Iterator[Traced]:
    """A job's body in its own process, under the supervisor's span (`parent`)."""
    if not on:
        yield Traced()
        return
    with _span(
        f"job {kind} body", _context_of(parent), [], "INTERNAL", **_job(kind, job_id, attempt)
    ) as traced:
        yield traced


def _job(kind: str, job_id: str, attempt: int) -> dict[str, Any]:
    return {
        "units_api.job.kind": kind,
        "units_api.job.id": job_id,
        "units_api.job.attempt": attempt,
    }


@contextmanager
def delivery_attempt(
    webhook_id: str, delivery_id: str, event_id: str, attempt: int, written_by: str | None
) -> Iterator[Traced]:
    """A webhook delivery attempt (a root span), linked to the span that wrote its event;
    its `traceparent` goes out with the attempt's request."""
    if not on:
        yield Traced()
        return
    with _span(
        "webhook delivery",
        _context_of(None),
        _link_to(written_by),
        "CLIENT",
        **{
            "units_api.webhook.id": webhook_id,
            "units_api.delivery.id": delivery_id,
            "units_api.event.id": event_id,
            "units_api.delivery.attempt": attempt,
            "http.request.method": "POST",
        },
    ) as traced:
        yield traced
