"""The console's calls to the API, made inside the process through the whole application
(middleware, routes, services), acting as the session's key: a page can do exactly what the
key could do with curl, and shows the API's own answers and messages."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from units_api.auth.access import CONSOLE_KEY


@dataclass(slots=True)
class Answer:
    """An API answer: its status, headers (lower-case names) and body, JSON read with exact
    decimals (money is never rounded through floats)."""

    status: int
    headers: dict[str, str]
    content: bytes
    data: Any = field(default=None)

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def errors(self) -> dict[str, str]:
        """A 422's messages by field path, in the form's spelling (`paymentPlans.1.minPrice`)."""
        if not isinstance(self.data, dict):
            return {}
        found: dict[str, str] = {}
        for error in self.data.get("errors") or ():
            if isinstance(error, dict) and "field" in error:
                name = str(error["field"]).replace("[", ".").replace("]", "")
                found.setdefault(name, str(error.get("message", "")))
        return found

    @property
    def detail(self) -> str:
        if isinstance(self.data, dict):
            return str(self.data.get("detail") or self.data.get("title") or "")
        return ""


async def _run(app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
    await app(scope, receive, send)


def read_json(content: bytes) -> Any:
    return json.loads(content, parse_float=Decimal)


class Api:
    """Calls the application `app` as the key whose hash is `key_hash`, for one page."""

    def __init__(self, request: Request, key_hash: str) -> None:
        self._request = request
        self._key_hash = key_hash

    async def get(
        self,
        path: str,
        query: Mapping[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Answer:
        return await self.call("GET", path, query=query, headers=headers)

    async def send(
        self,
        method: str,
        path: str,
        body: bytes,
        headers: dict[str, str] | None = None,
        query: Mapping[str, Any] | None = None,
    ) -> Answer:
        sent = {"content-type": "application/json", **(headers or {})}
        return await self.call(method, path, query=query, body=body, headers=sent)

    async def call(
        self,
        method: str,
        path: str,
        query: Mapping[str, Any] | None = None,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
    ) -> Answer:
        app: ASGIApp = self._request.app
        scope = self._scope(method, path, query, body, headers or {})
        parts: list[bytes] = []
        start: dict[str, Any] = {}
        sent = False

        async def receive() -> Message:
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: Message) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body":
                parts.append(message.get("body", b""))

        # A task of its own: the request's context variables (request id, key) stay its own.
        await asyncio.create_task(_run(app, scope, receive, send))
        content = b"".join(parts)
        answer = Answer(
            int(start.get("status", 500)),
            {k.decode().lower(): v.decode() for k, v in start.get("headers", ())},
            content,
        )
        kind = answer.headers.get("content-type", "")
        if content and ("json" in kind):
            answer.data = read_json(content)
        return answer

    def _scope(
        self,
        method: str,
        path: str,
        query: Mapping[str, Any] | None,
        body: bytes,
        headers: dict[str, str],
    ) -> Scope:
        outer = self._request.scope
        sent = [(name.lower().encode(), value.encode()) for name, value in headers.items()]
        sent.append((b"content-length", str(len(body)).encode()))
        sent.append((b"host", b"console"))
        pairs = {name: value for name, value in (query or {}).items() if value not in (None, "")}
        return {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "root_path": "",
            "query_string": urlencode(pairs, doseq=True).encode(),
            "headers": sent,
            "client": outer.get("client"),
            "server": outer.get("server"),
            "app": outer.get("app"),
            CONSOLE_KEY: self._key_hash,
        }
