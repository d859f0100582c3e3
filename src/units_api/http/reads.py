"""A read run again, once, when the database connection under it broke.

A pooled connection the database closed is not handed out (`db.py`), but one can break while
a request uses it (the database restarted, or ended the connection, mid-statement). A GET or
HEAD changes nothing, so the app's handler for a database out of reach raises `ReadAgain`
for one whose answer has not begun, and `RetryReads`, outside the routes and their handlers,
runs the request again from the start, on fresh connections. A second failure is the 503,
and so is a read that ran out of time at once: it would only wait as long again.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from units_api.outage import timed_out

READ_METHODS = frozenset({"GET", "HEAD"})
_RETRIED = "units_api.read_again"


class ReadAgain(Exception):
    """Raised by an exception handler: run this read once more (see `RetryReads`)."""

    @staticmethod
    def allowed(scope: Scope, error: BaseException) -> bool:
        """Whether the request of `scope`, failed by `error`, may run once more."""
        return (
            scope.get("method") in READ_METHODS and not scope.get(_RETRIED) and not timed_out(error)
        )


class RetryReads:
    """Run a GET or HEAD again, once, when it raises `ReadAgain`; its request body (none,
    as a rule) is given again as it was read."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in READ_METHODS:
            await self.app(scope, receive, send)
            return
        received: list[Message] = []

        async def recording() -> Message:
            message = await receive()
            received.append(message)
            return message

        try:
            await self.app(scope, recording, send)
        except ReadAgain:
            replay = iter(received)

            async def replaying() -> Message:
                return next(replay, None) or await receive()

            await self.app({**scope, _RETRIED: True}, replaying, send)
