"""A server span per HTTP request, when traces are on (`units_api.tracing`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from units_api import tracing
from units_api.http.middleware import RouteTemplates

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

_TRACE_HEADERS = frozenset((b"traceparent", b"tracestate", b"baggage"))


class TracingMiddleware:
    """A server span per HTTP request, outside every other layer: named by method and route
    template once the request has been routed, continuing an incoming `traceparent`.

    The URL's query is left out: a filter or search may hold personal data."""

    def __init__(self, app: ASGIApp, routes: Iterable[Any] = ()) -> None:
        self.app = app
        self.templates = RouteTemplates(routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not tracing.on:
            await self.app(scope, receive, send)
            return
        from opentelemetry import context, propagate, trace
        from opentelemetry.trace import SpanKind, StatusCode

        carrier = {
            name.decode("latin-1"): value.decode("latin-1")
            for name, value in scope["headers"]
            if name in _TRACE_HEADERS
        }
        parent = propagate.extract(carrier)
        method: str = scope["method"]
        client = scope.get("client")
        attributes: dict[str, Any] = {
            "http.request.method": method,
            "url.path": scope["path"],
            "url.scheme": scope.get("scheme", "http"),
            "network.protocol.version": scope.get("http_version", "1.1"),
        }
        if client:
            attributes["client.address"] = client[0]
        for name, value in scope["headers"]:
            if name == b"user-agent":
                attributes["user_agent.original"] = value.decode("latin-1")[:500]
        span = tracing.tracer().start_span(
            method, context=parent, kind=SpanKind.SERVER, attributes=attributes
        )
        token = context.attach(trace.set_span_in_context(span, parent))
        status = 0

        async def traced_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, traced_send)
        except BaseException as exc:
            span.record_exception(exc)
            span.set_status(StatusCode.ERROR, type(exc).__name__)
            raise
        finally:
            route = self._route(scope)
            span.update_name(f"{method} {route}")
            span.set_attribute("http.route", route)
            if status:
                span.set_attribute("http.response.status_code", status)
                if status >= 500:
                    span.set_status(StatusCode.ERROR)
            request_id = scope.get("state", {}).get("request_id")
            if request_id:
                span.set_attribute("units_api.request_id", request_id)
            context.detach(token)
            span.end()

    def _route(self, scope: Scope) -> str:
        template = getattr(scope.get("route"), "path_format", None)
        return template if isinstance(template, str) else self.templates.find(scope["path"])
