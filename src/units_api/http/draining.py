"""Draining: a server that is asked to stop first leaves its proxy's rotation.

With UNITS_API_SHUTDOWN_DRAIN_SECONDS above 0, SIGTERM or SIGINT does not stop `serve` at
once: for that long it goes on serving while `/readyz` answers 503 (a proxy's health check
takes the server out of rotation) and every answer closes its connection (`Connection:
close`, so no client or proxy keeps a connection the server is about to close). Only then is
uvicorn's own stop run: it stops accepting connections and lets the requests in flight
finish. SIGINT during the drain (Ctrl-C again) stops at once; a repeated SIGTERM changes
nothing (a process manager may signal every process of a group, and uvicorn's supervisor
signals its workers again).

The state is the process's: uvicorn's protocol (`clients.py`) reads it, not the app.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections.abc import Callable
from types import FrameType

log = logging.getLogger(__name__)
SIGNALS = (signal.SIGTERM, signal.SIGINT)
# The server's own handler of a signal (uvicorn's): what stops it.
Stopper = Callable[[int, FrameType | None], object]

_draining = False


def draining() -> bool:
    """Whether this process was asked to stop and is leaving its proxy's rotation."""
    return _draining


def _set(value: bool) -> None:
    global _draining
    _draining = value


class _Drain:
    """Stands in front of the server's signal handlers: the first signal starts the drain
    and runs the server's handler `seconds` later; SIGINT during the drain runs it at once."""

    def __init__(
        self, seconds: float, loop: asyncio.AbstractEventLoop, stoppers: dict[int, Stopper]
    ) -> None:
        self._seconds = seconds
        self._loop = loop
        self._stoppers = stoppers
        self._timer: asyncio.TimerHandle | None = None
        self._stopped = False

    def signalled(self, number: int, frame: FrameType | None) -> None:
        # A signal handler: it only sets the flag and hands the rest to the event loop.
        if not draining():
            _set(True)
            self._loop.call_soon_threadsafe(self._begin, number)
        elif number == signal.SIGINT:
            self._loop.call_soon_threadsafe(self._stop, number)

    def _begin(self, number: int) -> None:
        log.info(
            "stopping: draining before the server stops accepting connections",
            extra={"signal": signal.Signals(number).name, "drainSeconds": self._seconds},
        )
        self._timer = self._loop.call_later(self._seconds, self._stop, number)

    def _stop(self, number: int) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
        self._stoppers[number](number, None)


def drain_on_signals(seconds: float) -> Callable[[], None]:
    """Puts a drain of `seconds` before what SIGTERM and SIGINT do now (the server's stop);
    returns what puts their handlers back. Nothing changes for 0 seconds, outside the main
    thread (signals are not its to handle), or for a signal without a handler of the server."""
    if seconds <= 0 or threading.current_thread() is not threading.main_thread():
        return lambda: None
    stoppers: dict[int, Stopper] = {}
    for each in SIGNALS:
        handler = signal.getsignal(each)
        if callable(handler):
            stoppers[each] = handler
    drain = _Drain(seconds, asyncio.get_running_loop(), stoppers)
    for number in stoppers:
        signal.signal(number, drain.signalled)

    def restore() -> None:
        for number, handler in stoppers.items():
            signal.signal(number, handler)
        _set(False)

    return restore
