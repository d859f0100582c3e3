"""The console's calls to the API, made inside the process through the whole application
(middleware, routes, services), acting as the session's key: a page can do exactly what the
key could do with curl, and shows the API's own answers and messages."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

import msgspec
from starlette.datastructures import UploadFile
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


_JSON = msgspec.json.Decoder(float_hook=Decimal)


def read_json(content: bytes) -> Any:
    """JSON with its fractions as exact decimals (a third of the standard library's time)."""
    return _JSON.decode(content)


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
        body: bytes | _Chunks = b"",
        headers: dict[str, str] | None = None,
        size: int | None = None,
    ) -> Answer:
        app: ASGIApp = self._request.app
        length = len(body) if isinstance(body, bytes) else size or 0
        scope = self._scope(method, path, query, length, headers or {})
        parts: list[bytes] = []
        start: dict[str, Any] = {}
        chunks = body if isinstance(body, _Chunks) else _Chunks(body)

        async def receive() -> Message:
            chunk = await chunks.next()
            if chunk is None:
                return {"type": "http.disconnect"}
            return {"type": "http.request", "body": chunk, "more_body": not chunks.done}

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

    async def stream(self, path: str) -> tuple[Answer, AsyncIterator[bytes]]:
        """A GET whose body may be large (an export's file): its status and headers once they
        come, and its body as it comes, never held whole in memory."""
        app: ASGIApp = self._request.app
        scope = self._scope("GET", path, None, 0, {})
        messages: asyncio.Queue[Message | None] = asyncio.Queue(maxsize=8)

        async def receive() -> Message:
            await asyncio.Event().wait()  # nothing to send; wait to be cancelled
            raise AssertionError

        async def run() -> None:
            try:
                await app(scope, receive, messages.put)
            finally:
                await messages.put(None)

        task = asyncio.create_task(run())
        start = await messages.get()
        assert start is not None and start["type"] == "http.response.start"
        headers = {k.decode().lower(): v.decode() for k, v in start.get("headers", ())}
        answer = Answer(int(start["status"]), headers, b"")

        async def body() -> AsyncIterator[bytes]:
            try:
                while (message := await messages.get()) is not None:
                    if message["type"] == "http.response.body" and message.get("body"):
                        yield message["body"]
            finally:
                task.cancel()

        if not answer.ok:
            answer.content = b"".join([chunk async for chunk in body()])
            if "json" in headers.get("content-type", ""):
                answer.data = read_json(answer.content)
        return answer, body()

    async def upload(
        self, path: str, fields: dict[str, str], name: str, file: UploadFile
    ) -> Answer:
        """A multipart/form-data POST of `fields` and one file, read from the upload as it is
        sent (a file of hundreds of MB is never held in memory)."""
        boundary = secrets.token_hex(16)
        head = b"".join(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{key}"\r\n\r\n'
            f"{value}\r\n".encode()
            for key, value in fields.items()
        )
        filename = (file.filename or "upload").replace('"', "").replace("\r", "").replace("\n", "")
        head += (
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; '
            f'filename="{filename}"\r\nContent-Type: application/octet-stream\r\n\r\n'
        ).encode()
        tail = f"\r\n--{boundary}--\r\n".encode()
        await file.seek(0)
        size = len(head) + (file.size or 0) + len(tail)
        headers = {"content-type": f"multipart/form-data; boundary={boundary}"}
        return await self.call(
            "POST", path, body=_Chunks(head, file, tail), headers=headers, size=size
        )

    def _scope(
        self,
        method: str,
        path: str,
        query: Mapping[str, Any] | None,
        length: int,
        headers: dict[str, str],
    ) -> Scope:
        outer = self._request.scope
        sent = [(name.lower().encode(), value.encode()) for name, value in headers.items()]
        sent.append((b"content-length", str(length).encode()))
        # The browser's own host and scheme: links the API writes from the request (a unit's
        # public page, a feed's address) point where the manager reached the service.
        sent.append((b"host", self._request.headers.get("host", "console").encode()))
        pairs = {name: value for name, value in (query or {}).items() if value not in (None, "")}
        return {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": method,
            "scheme": outer.get("scheme", "http"),
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


class _Chunks:
    """A request body handed to the application piece by piece: bytes before, a file's
    contents read in chunks, bytes after."""

    CHUNK = 1024 * 1024

    def __init__(self, head: bytes, file: UploadFile | None = None, tail: bytes = b"") -> None:
        self._parts: list[bytes | UploadFile] = [part for part in (head, file, tail) if part]
        self.done = False
        self._started = False

    async def next(self) -> bytes | None:
        if self.done:
            return None if self._started else b""
        self._started = True
        while self._parts:
            part = self._parts[0]
            if isinstance(part, bytes):
                self._parts.pop(0)
                self.done = not self._parts
                return part
            chunk = await part.read(self.CHUNK)
            if chunk:
                return chunk
            self._parts.pop(0)
        self.done = True
        return b""
