"""Query parameters: an operation takes those it declares, each at most once.

What an operation declares is what the OpenAPI document says it takes: the query parameters
of its route's `openapi_extra` (those its handler reads itself, built with `http/docs.query`)
and any in its endpoint's signature. Both are read from the routes once, at start-up, so a
parameter is accepted exactly when it is documented. `DeclaredQuery` answers any other (a
misspelt `filter=` for `p=`, which would otherwise be ignored) with a 400 naming it, and a
parameter given twice with a 400 too (a list is one comma-separated value), before the
endpoint runs; a request without a query string pays one test.

Operations outside the document (`/`, `/docs`, `/openapi.json`) and unknown paths are left
to the app.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from starlette._utils import get_route_path
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from units_api.errors import ApiError, InvalidParameter, UnknownParameter

Reject = Callable[[Request, ApiError], Awaitable[Response]]


@dataclass(frozen=True, slots=True)
class _Operation:
    path_regex: re.Pattern[str]
    names: tuple[str, ...]  # in the order the document lists them


def _signature_query(dependant: Dependant) -> list[str]:
    names = [field.alias for field in dependant.query_params]
    for dependency in dependant.dependencies:
        names += _signature_query(dependency)
    return names


def declared_query(route: APIRoute) -> tuple[str, ...]:
    """The names of the query parameters `route` declares, as its OpenAPI operation lists them."""
    extra = route.openapi_extra or {}
    documented = [p["name"] for p in extra.get("parameters", ()) if p.get("in") == "query"]
    return tuple(dict.fromkeys([*_signature_query(route.dependant), *documented]))


def query_names(query_string: bytes) -> list[str]:
    """The parameter names of a query string, decoded as Starlette's `parse_qsl` decodes them
    (blank values kept), without reading the values."""
    names = []
    for pair in query_string.split(b"&"):
        if pair:
            name = pair.partition(b"=")[0].decode("latin-1")
            names.append(unquote(name.replace("+", " ")) if "%" in name or "+" in name else name)
    return names


def query_error(query_string: bytes, declared: Collection[str]) -> ApiError | None:
    """What is wrong with the names in `query_string`, if anything: `declared` lists those
    the operation takes."""
    names = query_names(query_string)
    unknown = [name for name in dict.fromkeys(names) if name not in declared]
    if unknown:
        return UnknownParameter(unknown, list(declared))
    if len(set(names)) < len(names):
        name, times = Counter(names).most_common(1)[0]
        return InvalidParameter(
            name, f"is given {times} times; give it once (a list is one comma-separated value)"
        )
    return None


class DeclaredQuery:
    """Check the query of every request to a documented operation among `routes`; a bad one
    is answered by `reject` (which renders the error, after whatever must come first)."""

    def __init__(self, app: ASGIApp, routes: Iterable[Any], reject: Reject) -> None:
        self.app = app
        self.reject = reject
        self.by_method: dict[str, list[_Operation]] = {}
        for route in routes:
            if isinstance(route, APIRoute) and route.include_in_schema:
                operation = _Operation(route.path_regex, declared_query(route))
                for method in route.methods or ():
                    self.by_method.setdefault(method, []).append(operation)

    def _operation(self, scope: Scope) -> _Operation | None:
        path = get_route_path(scope)
        for operation in self.by_method.get(scope["method"], ()):
            if operation.path_regex.match(path):
                return operation
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["query_string"]:
            operation = self._operation(scope)
            error = operation and query_error(scope["query_string"], operation.names)
            if error:
                response = await self.reject(Request(scope, receive), error)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
