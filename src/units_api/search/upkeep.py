"""PostgreSQL: the search table vacuumed soon after it changes, so that a search walked in
creation order reads its index alone (search.index.walked_rows).

An index-only scan reads a row from the table anyway when its page is not marked visible to
every transaction, which only VACUUM marks. The newest units, the first a newest-first walk
meets, are exactly the ones not yet marked: 13,794 new units at 1,000,000 cost a page of a
search 17.9 ms, and 2.2 ms after a vacuum that took 0.4 s. PostgreSQL's autovacuum comes to a
table after a fifth of it has changed by default (0.5 % here, migration 0019) and may be
turned off; this step asks for no more than it needs, every VACUUM_EVERY seconds: nothing
unless VACUUM_AFTER rows were written since the table's last vacuum; one process at a time
(an advisory lock), and not while autovacuum is at it. Run by the processes that do
background work (background.start_background).
"""

from __future__ import annotations

import logging
import time

from sqlalchemy import text

from units_api.db import Database

log = logging.getLogger(__name__)

VACUUM_EVERY = 30.0
VACUUM_AFTER = 1000

_WRITTEN = text(
    "SELECT n_ins_since_vacuum + n_dead_tup FROM pg_stat_user_tables "
    "WHERE relid = 'unit_search'::regclass"
)
# The advisory lock of the search table's vacuum ("srch", 1); another process holding it is
# already at it.
VACUUM_LOCK = (0x73726368, 1)
_TAKE = text("SELECT pg_try_advisory_lock({}, {})".format(*VACUUM_LOCK))
_GIVE = text("SELECT pg_advisory_unlock({}, {})".format(*VACUUM_LOCK))
# SKIP_LOCKED: autovacuum is already at it.
_VACUUM = text("VACUUM (SKIP_LOCKED) unit_search")


async def vacuum_search(db: Database, after: int = VACUUM_AFTER) -> bool:
    """Vacuum the search table if at least `after` of its rows were written since its last
    vacuum; whether it did."""
    if db.dialect != "postgresql":
        return False
    async with db.read() as conn:  # outside any transaction, as VACUUM must be
        written = (await conn.execute(_WRITTEN)).scalar_one_or_none() or 0
        if written < after:
            return False
        if not (await conn.execute(_TAKE)).scalar_one():
            return False
        started = time.perf_counter()
        try:
            await conn.execute(_VACUUM)
        finally:
            await conn.execute(_GIVE)
    log.info(
        "search table vacuumed",
        extra={"rows": written, "durationMs": round((time.perf_counter() - started) * 1000, 1)},
    )
    return True
