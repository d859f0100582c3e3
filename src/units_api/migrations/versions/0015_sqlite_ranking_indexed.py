"""SQLite: the search table's ranking words indexed beside its body, so a search by relevance
counts and walks each score's tier through the full-text index (search.rank.relevance_tiers)
instead of scoring every match. The `~` that marks a name's words is kept as part of a word.

The FTS5 table is rebuilt from the old one's rows in the migration's transaction (no document
is read again). PostgreSQL has nothing to do (its ranking index is migration 0013's).

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-25
"""

from __future__ import annotations

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def _rebuild(ranking_indexed: bool) -> None:
    ranking = "ranking" if ranking_indexed else "ranking UNINDEXED"
    tokenize = "ascii tokenchars ''~''" if ranking_indexed else "ascii"
    op.execute(
        f"CREATE VIRTUAL TABLE unit_search_next USING fts5(unit_id UNINDEXED, body, {ranking}, "
        f"tokenize = '{tokenize}', detail = 'column')"
    )
    op.execute(
        "INSERT INTO unit_search_next (rowid, unit_id, body, ranking) "
        "SELECT rowid, unit_id, body, ranking FROM unit_search"
    )
    op.execute("DROP TABLE unit_search")
    op.execute("ALTER TABLE unit_search_next RENAME TO unit_search")


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _rebuild(ranking_indexed=True)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        _rebuild(ranking_indexed=False)
