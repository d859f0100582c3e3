"""SQLite: reads of one row by its key on the event loop's thread, for a server process's
gathered updates (`units/gathering.py`).

A gathered PATCH reads its unit first, outside the writer's turn (`writer.py`). On a pooled
connection that read goes through the driver's thread, and waits for the loop on its way
back: gathered so, PATCHes ran slower than alone, where the read runs within the writer's
turn, on the loop's thread (bench/README.md). Such a read costs SQLite tens of microseconds,
so here it runs on the loop's thread too, on a connection of its own in autocommit mode: each
statement its own read transaction, on the newest committed state, which in WAL mode never
waits for the writer. A read that would wait (a lock another process holds while it recovers
the log) or fails in any way is not made here (`UNREAD`): the caller reads on a pooled
connection, which waits, or raises, as every read does.
"""

from __future__ import annotations

import sqlite3
from contextlib import suppress
from typing import Any


class Unread:
    """What `InlineReads.first` gives when it could not read: the caller reads as it would
    have without it."""


UNREAD = Unread()


class InlineReads:
    """One SQLite file's reads on the loop's thread (see the module's text)."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._conn: sqlite3.Connection | None = None

    def first(self, sql: str, parameters: tuple[Any, ...]) -> tuple[Any, ...] | Unread | None:
        try:
            if self._conn is None:
                # No busy wait: the loop must not sleep in SQLite's busy handler.
                conn = sqlite3.connect(
                    self._path, timeout=0, isolation_level=None, check_same_thread=False
                )
                conn.execute("PRAGMA query_only=1")
                self._conn = conn
            # Every row fetched: the statement is done, and its read transaction with it (a
            # reader left open would hold back the checkpoints).
            rows: list[tuple[Any, ...]] = self._conn.execute(sql, parameters).fetchall()
        except sqlite3.Error:
            self.close()
            return UNREAD
        return rows[0] if rows else None

    def close(self) -> None:
        if self._conn is not None:
            with suppress(sqlite3.Error):
                self._conn.close()
            self._conn = None
