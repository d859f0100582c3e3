"""Waking the event worker when events are written, rather than at its next poll.

In the process that wrote them, at once (the database's `on_events` listeners run after the
commit). On PostgreSQL also every other process: written events are announced with NOTIFY,
at most once per NOTIFY_EVERY seconds per process, and workers LISTEN. A connection lost
(the database restarted or failed over) is made again, and the worker then looks for what
was written meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from units_api.db import Database
from units_api.loop import wait_any

log = logging.getLogger(__name__)
CHANNEL = "units_api_events"
NOTIFY_EVERY = 0.02
# With nothing to announce, the connection is checked this often (seconds), and dropped for
# a new one when it does not answer within the database's bound (or CHECK_TIMEOUT).
CHECK_EVERY = 10.0
CHECK_TIMEOUT = 5.0


class Wakeup:
    def __init__(self, db: Database) -> None:
        self.db = db
        self.event = asyncio.Event()
        self._announce = asyncio.Event()
        self._lost = False
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
                if not self._lost:  # one line per loss, not one per attempt
                    log.warning("event wake-up connection lost; reconnecting")
                self._lost = True
                await asyncio.sleep(1)

    async def _connected(self, listen: bool) -> None:
        """Announce and listen on one connection until it is lost: closed by the database
        (a restart, a failover: asyncpg says so at once), or silent for a check's bound."""
        conn = await self.db.raw_connection()
        if self._lost:
            log.warning("event wake-up connection made again")
            self._lost = False
        lost = asyncio.Event()
        conn.add_termination_listener(lambda _conn: lost.set())
        try:
            if listen:
                await conn.add_listener(CHANNEL, self._heard)
                self.event.set()  # what was written while none listened is looked for now
            while True:
                await wait_any((self._announce, lost), CHECK_EVERY)
                if lost.is_set() or conn.is_closed():
                    raise ConnectionError("the database closed the wake-up connection")
                if not self._announce.is_set():
                    await conn.execute("SELECT 1", timeout=self.db.bound or CHECK_TIMEOUT)
                    continue
                self._announce.clear()
                await conn.execute(f"NOTIFY {CHANNEL}")
                await asyncio.sleep(NOTIFY_EVERY)
        finally:
            with contextlib.suppress(Exception):
                conn.terminate()
