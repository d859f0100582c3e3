"""IndexNow's place in the change feed (migration 0025): one row, held by one process at a
time (a lease), so what it has sent survives restarts and is sent by one process only."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Integer, String, Table, Text, Uuid

from units_api.db import UTCDateTime, metadata

indexnow_state = Table(
    "indexnow_state",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),  # always 1
    # The last feed position whose pages were sent; null until IndexNow first runs (it then
    # starts from the feed's end: the sitemap tells engines of every page already there).
    Column("pos", BigInteger),
    # The website channels as of `pos` (a JSON list of names): whether a unit was live
    # before an event is judged on the channels of that moment, even one since deleted.
    Column("channels", Text, nullable=False, server_default="[]"),
    # A channel that became or stopped being a website at `pos + 1`: its units are sent in
    # pages, `walked` the last unit id sent (null: none yet).
    Column("walk_channel", String(100)),
    Column("walked", Uuid),
    # Which process holds the row, until when.
    Column("owner", Uuid),
    Column("lease_until", UTCDateTime),
)
