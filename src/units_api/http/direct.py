"""The hottest routes, answered without the framework's per-request layers.

Behind the middleware, every request goes through an exception middleware, an exit stack,
a match against each route in turn, the route's request wrappers and dependency solving;
for one unit's read or write that is a large part of the request's CPU. `DirectRoutes` sits
just inside the request context middleware (request id, access log, the 500 answer) and
calls the endpoints of the operations it is given itself: the same functions, path
parameters converted by the routes' own convertors, exceptions answered by the app's own
handlers. Everything else, and any request those routes would not match, goes on to the app
unchanged.

An endpoint served here takes only its path parameters and the request, and answers with a
`Response`: there is nothing for the framework to solve or serialise (checked at start).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi.routing import APIRoute
from starlette._utils import get_route_path
from starlette.datastructures import URLPath
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match, NoMatchFound
from starlette.types import ASGIApp, Receive, Scope, Send

Endpoint = Callable[..., Awaitable[Response]]
Handler = Callable[[Request, Any], Response | Awaitable[Response]]


@dataclass(frozen=True, slots=True)
class _Direct:
    route: APIRoute
    endpoint: Endpoint


def _direct(route: APIRoute) -> _Direct:
    names = set(route.param_convertors)
    parameters = inspect.signature(route.endpoint).parameters
    if set(parameters) != names | {"request"} or route.dependencies:
        raise TypeError(
            f"{route.name} cannot be served directly: it takes more than its path and request"
        )
    return _Direct(route, route.endpoint)


class DirectRoutes:
    """Serve the routes of `operations` (operation ids, found among `routes`) directly,
    answering their errors with `handlers` (the app's, by exception class); pass the rest on
    to `app`."""

    def __init__(
        self,
        app: ASGIApp,
        routes: Iterable[Any],
        operations: Collection[str],
        handlers: Mapping[Any, Handler],
    ) -> None:
        self.app = app
        found = {
            r.operation_id: r
            for r in routes
            if isinstance(r, APIRoute) and r.operation_id in operations
        }
        missing = set(operations) - set(found)
        if missing:
            raise LookupError(f"no route for {sorted(missing)}")
        self.by_method: dict[str, list[_Direct]] = {}
        for route in found.values():
            for method in route.methods or ():
                self.by_method.setdefault(method, []).append(_direct(route))
        self.handlers = handlers

    def _handler(self, exc: Exception) -> Handler | None:
        for kind in type(exc).__mro__:
            if kind in self.handlers:
                return self.handlers[kind]
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        candidates = self.by_method.get(scope["method"]) if scope["type"] == "http" else None
        if candidates:
            path = get_route_path(scope)
            for direct in candidates:
                match = direct.route.path_regex.match(path)
                if match is None:
                    continue
                convertors = direct.route.param_convertors
                params = {
                    name: convertors[name].convert(v) for name, v in match.groupdict().items()
                }
                scope["path_params"] = params
                scope["route"] = direct.route  # as the router records it: metrics' template
                request = Request(scope, receive)
                try:
                    response = await direct.endpoint(request=request, **params)
                except Exception as exc:
                    handler = self._handler(exc)
                    if handler is None:
                        raise
                    answer = handler(request, exc)
                    response = await answer if inspect.isawaitable(answer) else answer
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


class Prefixed(BaseRoute):
    """`routes` under one path `prefix`, tried in turn only for a path under it: placed first
    among the app's routes, they are found without trying every API route before them, and
    API requests try them with one comparison."""

    def __init__(self, prefix: str, routes: Sequence[BaseRoute]) -> None:
        self.prefix = prefix
        self.routes = list(routes)

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] not in ("http", "websocket") or not get_route_path(scope).startswith(
            self.prefix
        ):
            return Match.NONE, {}
        partial: tuple[Match, Scope] | None = None
        for route in self.routes:
            match, child = route.matches(scope)
            if match is Match.FULL:
                return match, {**child, _CHOSEN: route}
            if match is Match.PARTIAL and partial is None:
                partial = (match, {**child, _CHOSEN: route})
        return partial or (Match.NONE, {})

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        route: BaseRoute = scope[_CHOSEN]
        scope["route"] = route  # the route that answers, as the router records it
        await route.handle(scope, receive, send)

    def url_path_for(self, name: str, /, **path_params: Any) -> URLPath:
        for route in self.routes:
            try:
                return route.url_path_for(name, **path_params)
            except NoMatchFound:
                pass
        raise NoMatchFound(name, path_params)


_CHOSEN = "units_api.route"
