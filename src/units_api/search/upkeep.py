"""PostgreSQL: the search table vacuumed soon after it changes, so that a search walked in
creation order reads its index alone (search.index._walked).

An index-only scan reads a row from the table anyway when its page is not marked visible to
every transaction, which only VACUUM marks. The newest units, the first a newest-first walk
meets, are exactly the ones not yet marked: 13,794 new units at 1,000,000 cost a page of a
search 17.9 ms, and 2.2 ms after a vacuum that took 0.4 s. PostgreSQL's autovacuum comes to a
table after a fifth of it has changed by default (0.5 % here, migration 0019) and may be
turned off; this step asks for no more than it needs, every VACUUM_EVERY seconds: nothing
unless VACUUM_AFTER rows were written since the table's last vacuum, and it skips the table
when another vacuum holds it. Run by the processes that do background work
(background.start_background).
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
# SKIP_LOCKED: another process's vacuum, or autovacuum's, is already at it.
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
        started = time.perf_counter()
        await conn.execute(_VACUUM)
    log.info(
        "search table vacuumed",
        extra={"rows": written, "durationMs": round((time.perf_counter() - started) * 1000, 1)},
    )
    return True
