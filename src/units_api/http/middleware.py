"""Pure ASGI middleware: request ids, trailing-slash folding, the URL's length, rate-limit
headers, the access log and the request metrics."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable
from typing import Any

import orjson
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from units_api.errors import PROBLEM_CONTENT_TYPE, ApiError, UriTooLong
from units_api.ids import new_request_id
from units_api.logs import access_log, request_id_var
from units_api.metrics import UNMATCHED, observe_request

log = logging.getLogger(__name__)
UNEXPECTED = "An unexpected error occurred; it was logged with this request's id."
_VALID_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:@/+=-]{1,200}$")
STATE_HEADERS = "response_headers"
STATE_KEY_ID = "key_id"
# Of the request target (path and query, as sent): longer is a 414. Long filters go in a body.
MAX_URL_BYTES = 8192


def _incoming_request_id(scope: Scope) -> str | None:
    for name, value in scope["headers"]:
        if name == b"x-request-id":
            text = value.decode("latin-1")
            return text if _VALID_REQUEST_ID.match(text) else None
    return None


def _url_too_long(scope: Scope) -> UriTooLong | None:
    query: bytes = scope["query_string"]
    raw: bytes = scope.get("raw_path") or scope["path"].encode()
    if len(raw) + len(query) < MAX_URL_BYTES:
        return None
    # Some servers pass the query in raw_path too: count it once.
    size = len(raw.partition(b"?")[0]) + (len(query) + 1 if query else 0)
    if size <= MAX_URL_BYTES:
        return None
    return UriTooLong(
        f"The URL (path and query) is {size:,} bytes; at most {MAX_URL_BYTES:,} are accepted. "
        "Send a long filter in a body: the query endpoint (POST /api/v2/units/query), a bulk "
        "update or an export."
    )


# The page (body, media type) a path answers an error with, when it is a page's path (a
# public page says what went wrong in HTML, in its language), else None.
ErrorPages = Callable[[str, int], tuple[bytes, str] | None]


class RouteTemplates:
    """The template of the route a path falls under, for requests answered before routing (a
    rejected query, a URL too long) or that matched no route (`UNMATCHED`)."""

    def __init__(self, routes: Iterable[Any]) -> None:
        self.routes = [
            (route.path_regex, route.path_format)
            for route in routes
            if hasattr(route, "path_regex") and hasattr(route, "path_format")
        ]

    def find(self, path: str) -> str:
        for regex, template in self.routes:
            if regex.match(path):
                return str(template)
        return UNMATCHED


def _route_template(scope: Scope, templates: RouteTemplates) -> str:
    """The template of the route that answered (`scope["route"]`, set by the router and by
    the direct routes), never the raw path: ids do not make series."""
    route = scope.get("route")
    template = getattr(route, "path_format", None)
    if isinstance(template, str):
        return template
    return templates.find(scope["path"])


class RequestContextMiddleware:
    """Every path answers with and without a trailing slash, without a redirect.

    A request is counted in the metrics just before the last part of its answer is sent, so
    a client that has its answer finds it counted in the next scrape."""

    def __init__(
        self,
        app: ASGIApp,
        log_requests: bool = True,
        routes: Iterable[Any] = (),
        count_requests: bool = True,
        pages: ErrorPages | None = None,
    ) -> None:
        self.app = app
        self.pages = pages
        self.log_requests = log_requests
        self.count_requests = count_requests
        self.templates = RouteTemplates(routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if len(path) > 1 and path.endswith("/"):
            scope["path"] = path.rstrip("/") or "/"
        request_id = _incoming_request_id(scope) or new_request_id()
        token = request_id_var.set(request_id)
        state: dict[str, Any] = scope.setdefault("state", {})
        state["request_id"] = request_id
        state["original_path"] = path
        started = time.perf_counter()
        status = 500
        response_started = False
        counted = False

        def count() -> None:
            nonlocal counted
            counted = True
            if not self.count_requests:
                return
            route = _route_template(scope, self.templates)
            observe_request(scope["method"], route, status, time.perf_counter() - started)

        async def send_with_headers(message: Message) -> None:
            nonlocal status
            nonlocal response_started
            if message["type"] == "http.response.start":
                response_started = True
                status = message["status"]
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", request_id.encode()))
                headers.extend(state.get(STATE_HEADERS, ()))
                message["headers"] = headers
            elif message["type"] == "http.response.body" and not (
                counted or message.get("more_body")
            ):
                count()  # the answer's last part: counted before it goes
            await send(message)

        try:
            if too_long := _url_too_long(scope):
                page = self.pages(path, too_long.status) if self.pages else None
                if page is not None:
                    await _send_page(send_with_headers, too_long.status, page)
                else:
                    await _send_problem(send_with_headers, too_long.problem(path, request_id))
                return
            await self.app(scope, receive, send_with_headers)
        except ClientDisconnect:
            # The client left, or its body came too late (`clients.py` answered 408): no
            # error of ours, counted and logged as nginx does, 499.
            if not response_started:
                status = 499
        except Exception:
            log.exception("unhandled error")
            if response_started:
                raise
            await _send_problem(send_with_headers, ApiError(UNEXPECTED).problem(path, request_id))
        finally:
            if not counted:
                count()
            if self.log_requests:
                self._log(scope, path, status, time.perf_counter() - started)
            request_id_var.reset(token)

    @staticmethod
    def _log(scope: Scope, path: str, status: int, elapsed: float) -> None:
        if not access_log.enabled():
            return
        query: bytes = scope["query_string"]
        client = scope.get("client")
        access_log.write(
            path,
            query.decode("latin-1"),
            scope["method"],
            status,
            int(elapsed * 100000.0 + 0.5) / 100,  # ms to 0.01, cheaper than round()
            client[0] if client else None,
            scope["state"].get(STATE_KEY_ID),
        )


async def _send_page(send: Send, status: int, page: tuple[bytes, str]) -> None:
    body, media_type = page
    headers = [(b"content-type", media_type.encode()), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _send_problem(send: Send, problem: dict[str, Any]) -> None:
    body = orjson.dumps(problem)
    await send(
        {
            "type": "http.response.start",
            "status": problem["status"],
            "headers": [
                (b"content-type", PROBLEM_CONTENT_TYPE.encode()),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def add_response_header(scope: Scope, name: str, value: str) -> None:
    scope.setdefault("state", {}).setdefault(STATE_HEADERS, []).append(
        (name.lower().encode("latin-1"), value.encode("latin-1"))
    )


def note_key(scope: Scope, key_id: str) -> None:
    """The caller's key id, for the access log (never the key)."""
    scope.setdefault("state", {})[STATE_KEY_ID] = key_id
