"""A real webhook receiver on 127.0.0.1: records what it is sent, answers as told."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web
from standardwebhooks.webhooks import Webhook


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    at: float

    @property
    def event(self) -> dict[str, Any]:
        value: dict[str, Any] = orjson.loads(self.body)
        return value

    def verify(self, secret: str) -> dict[str, Any]:
        """The event, if the signature holds for `secret` (raises otherwise)."""
        value: dict[str, Any] = Webhook(secret).verify(self.body, self.headers)
        return value


Answer = Callable[["Received"], tuple[int, dict[str, str]] | int]


@dataclass
class Receiver:
    url: str
    answer: Answer = field(default=lambda received: 200)
    received: list[Received] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    delay: float = 0.0  # seconds to take before answering
    reply: bytes = b"ok"  # the answer's body

    def of(self, unit_id: str) -> list[Received]:
        return [r for r in self.received if r.event.get("unitId") == unit_id]

    async def wait_for(
        self, check: Callable[[list[Received]], bool], seconds: float = 30
    ) -> list[Received]:
        """Until `check` holds for what arrived; fails after `seconds`."""
        deadline = time.monotonic() + seconds
        while not check(self.received):
            left = deadline - time.monotonic()
            assert left > 0, f"not received in {seconds}s; got {len(self.received)} requests"
            self.arrived.clear()
            with suppress(TimeoutError):
                await asyncio.wait_for(self.arrived.wait(), min(left, 0.5))
        return self.received


@asynccontextmanager
async def receiver() -> AsyncIterator[Receiver]:
    """A receiver at a path of its own, so requests meant for others are not counted."""
    path = f"/hooks/{uuid.uuid4().hex}"
    app = web.Application()
    state: dict[str, Receiver] = {}

    async def handle(request: web.Request) -> web.Response:
        target = state["receiver"]
        got = Received(dict(request.headers), await request.read(), time.monotonic())
        if target.delay:
            await asyncio.sleep(target.delay)
        answer = target.answer(got)
        target.received.append(got)
        target.arrived.set()
        status, headers = answer if isinstance(answer, tuple) else (answer, {})
        return web.Response(status=status, headers=headers, body=target.reply)

    app.router.add_post(path, handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    state["receiver"] = Receiver(f"http://127.0.0.1:{port}{path}")
    try:
        yield state["receiver"]
    finally:
        await runner.cleanup()
