"""Slow and idle clients: uvicorn's HTTP protocol with deadlines.

uvicorn waits for ever for a request's headers and body, and keeps a new connection that sends
nothing open for ever (its keep-alive timeout starts only after a first response). Here each
phase has UNITS_API_CLIENT_TIMEOUT_SECONDS: a connection that sends nothing is closed, a
request whose headers or body do not arrive in time is answered 408 (problem+json) and its
connection closed, and its handler, if it was waiting for the body, is told the client left.
A slow client holds only its own connection: the event loop serves everyone else meanwhile.

While the server drains before it stops (`draining.py`), every answer closes its connection.

A response's head is sent with the start of its body (`HeadWithBody`): uvicorn writes them
separately, and uvloop sends each write at once, so every answer cost two system calls.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from units_api.clock import duration_text
from units_api.errors import PROBLEM_CONTENT_TYPE, RequestTimeout
from units_api.http.draining import draining
from units_api.http.json import dumps
from units_api.ids import new_request_id

IDLE, HEADERS, BODY, RECEIVED = "idle", "headers", "body", "received"


@functools.cache
def client_timeout() -> float:
    """This process's UNITS_API_CLIENT_TIMEOUT_SECONDS (each worker reads its environment)."""
    from units_api.config import Settings

    return Settings().client_timeout_seconds


def timeout_response(path: str | None, seconds: float) -> bytes:
    """The whole 408 answer, written straight to the connection."""
    request_id = new_request_id()
    error = RequestTimeout(
        f"The request's headers and body must each arrive within {duration_text(seconds)}; "
        "the connection is closed."
    )
    body = dumps(error.problem(path or "", request_id))
    head = (
        "HTTP/1.1 408 Request Timeout\r\n"
        f"content-type: {PROBLEM_CONTENT_TYPE}\r\n"
        f"content-length: {len(body)}\r\n"
        f"x-request-id: {request_id}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode() + body


class HeadWithBody:
    """A connection's transport that holds a response's head (uvicorn writes it alone, ending
    with its blank line) until the body's first write, and sends both in one call. A head
    whose body does not follow in the same turn of the event loop (a stream waiting for its
    first piece, a 304) goes at the end of that turn."""

    __slots__ = ("_head", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._head: bytes | None = None

    def write(self, data: bytes) -> None:
        head = self._head
        if head is not None:
            self._head = None
            self._transport.writelines((head, data))
        elif data[:5] == b"HTTP/" and data[-4:] == b"\r\n\r\n":
            self._head = data
            self._loop.call_soon(self.release)
        else:
            self._transport.write(data)

    def release(self) -> None:
        """Send a head still held."""
        head = self._head
        if head is not None:
            self._head = None
            if not self._transport.is_closing():
                self._transport.write(head)

    def close(self) -> None:
        self.release()
        self._transport.close()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class TimedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a deadline on each phase a client controls: the
    first bytes of a new connection, a request's headers, its body."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._phase = IDLE
        self._deadline: asyncio.TimerHandle | None = None
        self._seconds = client_timeout()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.transport = HeadWithBody(transport, self.loop)  # type: ignore[assignment]
        self._arm(IDLE)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm(HEADERS)

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._arm(BODY)
        if draining() and self.cycle is not None:
            self.cycle.keep_alive = False  # answered with `Connection: close`

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._disarm()
        self._phase = RECEIVED

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._phase == RECEIVED and not self.transport.is_closing():
            self._phase = IDLE  # uvicorn's keep-alive timeout closes it if nothing comes

    def _arm(self, phase: str) -> None:
        self._disarm()
        self._phase = phase
        self._deadline = self.loop.call_later(self._seconds, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        cycle = self.cycle
        answer = self._phase == HEADERS
        if self._phase == BODY and cycle is not None and not cycle.response_started:
            cycle.disconnected = True  # the handler reading the body learns the client left
            cycle.message_event.set()
            answer = True
        if answer:
            raw = self.scope.get("raw_path") if self._phase == BODY else None
            path = raw.decode("latin-1") if raw else None
            self.transport.write(timeout_response(path, self._seconds))
        self.transport.close()
