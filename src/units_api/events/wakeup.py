"""Waking the event worker when events are written, rather than at its next poll.

In the process that wrote them, at once (the database's `on_events` listeners run after the
commit). On PostgreSQL also every other process: written events are announced with NOTIFY,
at most once per NOTIFY_EVERY seconds per process, and workers LISTEN.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from units_api.db import Database

log = logging.getLogger(__name__)
CHANNEL = "units_api_events"
NOTIFY_EVERY = 0.02


class Wakeup:
    def __init__(self, db: Database) -> None:
        self.db = db
        self.event = asyncio.Event()
        self._announce = asyncio.Event()
        db.on_events.append(self.written)

    def written(self) -> None:
        self.event.set()
        self._announce.set()

    def _heard(self, *_: Any) -> None:
        self.event.set()

    async def run(self, listen: bool, stop: asyncio.Event) -> None:
        """Until `stop` (PostgreSQL): announce this process's events, and with `listen` hear
        the others'."""
        if self.db.dialect != "postgresql":
            return
        while not stop.is_set():
            connected = asyncio.create_task(self._connected(listen))
            stopped = asyncio.create_task(stop.wait())
            await asyncio.wait((connected, stopped), return_when=asyncio.FIRST_COMPLETED)
            for task in (connected, stopped):
                task.cancel()
            await asyncio.gather(connected, stopped, return_exceptions=True)
            if connected.done() and not connected.cancelled() and connected.exception():
                log.warning("event wake-up connection lost; reconnecting")
                await asyncio.sleep(1)

    async def _connected(self, listen: bool) -> None:
        conn = await self.db.raw_connection()
        try:
            if listen:
                await conn.add_listener(CHANNEL, self._heard)
            while True:
                await self._announce.wait()
                self._announce.clear()
                await conn.execute(f"NOTIFY {CHANNEL}")
                await asyncio.sleep(NOTIFY_EVERY)
        finally:
            with contextlib.suppress(Exception):
                await conn.close()
