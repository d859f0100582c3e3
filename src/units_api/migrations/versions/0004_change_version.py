"""A version of the whole unit set: every statement that writes units bumps it.

`unit_counters.changes` is summed into one number that grows with every committed change to
the units table, whoever makes it (the service, a bulk update, COPY, a hand-written UPDATE):
a count read in the same statement as that number stays exact for as long as it is unchanged.

PostgreSQL bumps it once per statement; the shard is taken from the transaction id, so a
transaction holds at most one counter row and concurrent writers rarely share one. SQLite,
with one writer at a time and no statement triggers, bumps shard 0 once per row.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

EVENTS = ("insert", "update", "delete")
_SQLITE_TRIGGERS = (
    "CREATE TRIGGER units_changed_insert AFTER INSERT ON units "
    "BEGIN UPDATE unit_counters SET changes = changes + 1 WHERE shard = 0; END",
    "CREATE TRIGGER units_changed_update AFTER UPDATE ON units "
    "BEGIN UPDATE unit_counters SET changes = changes + 1 WHERE shard = 0; END",
    "CREATE TRIGGER units_changed_delete AFTER DELETE ON units "
    "BEGIN UPDATE unit_counters SET changes = changes + 1 WHERE shard = 0; END",
)


def upgrade() -> None:
    op.add_column(
        "unit_counters",
        sa.Column("changes", sa.BigInteger(), nullable=False, server_default="0"),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE FUNCTION units_changed() RETURNS trigger LANGUAGE plpgsql AS $$ "
            "BEGIN "
            "UPDATE unit_counters SET changes = changes + 1 WHERE shard = txid_current() % 16; "
            "RETURN NULL; "
            "END $$"
        )
        op.execute(
            "CREATE TRIGGER units_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON units "
            "FOR EACH STATEMENT EXECUTE FUNCTION units_changed()"
        )
        return
    for statement in _SQLITE_TRIGGERS:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER units_changed ON units")
        op.execute("DROP FUNCTION units_changed()")
    else:
        for event in EVENTS:
            op.execute("DROP TRIGGER units_changed_" + event)
    with op.batch_alter_table("unit_counters") as batch:
        batch.drop_column("changes")
