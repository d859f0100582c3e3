"""The listing fields of a unit (currency, country, offeringType, bedrooms, bathrooms,
completionStatus, handoverDate): a typed column each, for filters, sorts and aggregates, and
the field in every stored record, null.

The columns are nullable without a default, so adding them rewrites no row and holds the
table's lock only for an instant. The records (`doc`, which the API returns as stored) are
then given the seven keys, null, where the API writes them (after `readings`, before
`createdAt`), in batches of BATCH units, each committed on its own on PostgreSQL: no lock is
held for long and writes go on meanwhile. A record that already has them (written meanwhile
by the new code) is left as it is, so an interrupted run is simply run again. Versions and
times are unchanged: the unit's values are the same. At 1,000,000 units (with 0020): 2.6
minutes in all.

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

BATCH = 2000
COLUMNS = (
    ("currency", "varchar(3)"),
    ("country", "varchar(2)"),
    ("offering_type", "varchar(10)"),
    ("bedrooms", "integer"),
    ("bathrooms", "integer"),
    ("completion_status", "varchar(10)"),
    ("handover_date", "varchar(10)"),
)
FIELDS = (
    "currency",
    "country",
    "offeringType",
    "bedrooms",
    "bathrooms",
    "completionStatus",
    "handoverDate",
)
# In a stored record `"createdAt":` is only ever its own key: inside a string every quote is
# escaped, so `t"` cannot appear there.
_BEFORE = '"createdAt":'
_NULLS = "".join(f'"{name}":null,' for name in FIELDS)
_HAS_FIELDS = f'%"{FIELDS[-1]}":%'

_units = sa.table("units", sa.column("id", sa.Uuid()), sa.column("doc", sa.Text()))


def _fill(conn: sa.Connection) -> None:
    last = None
    while True:
        query = sa.select(_units.c.id).order_by(_units.c.id).limit(BATCH)
        if last is not None:
            query = query.where(_units.c.id > last)
        ids = conn.execute(query).scalars().all()
        if not ids:
            return
        conn.execute(
            _units.update()
            .where(
                _units.c.id.between(ids[0], ids[-1]),
                _units.c.doc.not_like(_HAS_FIELDS),
            )
            .values(doc=sa.func.replace(_units.c.doc, _BEFORE, _NULLS + _BEFORE))
        )
        last = ids[-1]


def upgrade() -> None:
    conn = op.get_bind()
    postgresql = conn.dialect.name == "postgresql"
    for name, kind in COLUMNS:
        exists = "IF NOT EXISTS " if postgresql else ""
        op.execute(f"ALTER TABLE units ADD COLUMN {exists}{name} {kind}")
    if not postgresql:
        _fill(conn)
        return
    with op.get_context().autocommit_block():
        _fill(conn)
        # Every row was written again: the map search's index-only reads need the visibility
        # map set again, and the planner the new columns' statistics.
        op.execute("VACUUM (ANALYZE) units")


def downgrade() -> None:
    conn = op.get_bind()
    conn.execute(_units.update().values(doc=sa.func.replace(_units.c.doc, _NULLS, "")))
    for name, _ in reversed(COLUMNS):
        op.execute(f"ALTER TABLE units DROP COLUMN {name}")
