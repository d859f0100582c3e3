"""Unit locations for map search: each unit's point in `lng` and `lat`, and its index.

The columns are filled from the stored documents in batches by id, each batch written on
its own (on PostgreSQL outside the migration's transaction, so no lock is held for long and
an interrupted run resumes where it stopped: only rows still without a point are read). A
batch writes a unit only if it is still at the version read, so a unit changed meanwhile keeps
what its writer stored. PostgreSQL then builds the GiST index concurrently; SQLite indexes
the points in an R*Tree table keyed as its search table is (units/changes.py).

PostgreSQL also gets `units_distance`, filters.geo.distance written in SQL (the same
operations in the same order; the constants are repr() of filters.geo's RADIANS and
DIAMETER): a one-expression SQL function, which PostgreSQL inlines into a statement. SQLite
registers the Python function under that name on each connection (db.py).

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-25
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

from units_api.filters.geo import point
from units_api.http.json import load_stored

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

BATCH = 2000
_INDEX = (
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS ix_units_location ON units "
    "USING gist (point(lng, lat)) INCLUDE (lng, lat, created_at, id)"
)
_INVALID_INDEX = (
    "SELECT 1 FROM pg_index JOIN pg_class ON pg_class.oid = indexrelid "
    "WHERE relname = 'ix_units_location' AND NOT indisvalid"
)
_DISTANCE = """
CREATE OR REPLACE FUNCTION units_distance(
    lng float8, lat float8, lng_rad float8, lat_rad float8, lat_cos float8
) RETURNS float8 LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT 12742017.6::float8 * asin(least(sqrt(
    sin((lat * 0.017453292519943295::float8 - lat_rad) * 0.5::float8)
    * sin((lat * 0.017453292519943295::float8 - lat_rad) * 0.5::float8)
    + lat_cos * cos(lat * 0.017453292519943295::float8)
    * sin((lng * 0.017453292519943295::float8 - lng_rad) * 0.5::float8)
    * sin((lng * 0.017453292519943295::float8 - lng_rad) * 0.5::float8)
), 1::float8))
$$
"""
_RTREE = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS unit_locations "
    "USING rtree(id, min_lng, max_lng, min_lat, max_lat, +unit_id)"
)
_NEXT = "SELECT id, version, doc FROM units WHERE lng IS NULL AND id > :last ORDER BY id LIMIT :n"
_FIRST = "SELECT id, version, doc FROM units WHERE lng IS NULL ORDER BY id LIMIT :n"
_PG_FILL = (
    "UPDATE units SET lng = t.lng, lat = t.lat "
    "FROM unnest(CAST(:ids AS uuid[]), CAST(:versions AS integer[]), "
    "CAST(:lngs AS float8[]), CAST(:lats AS float8[])) AS t(id, version, lng, lat) "
    "WHERE units.id = t.id AND units.version = t.version AND units.lng IS NULL"
)
_SQLITE_FILL = "UPDATE units SET lng = :lng, lat = :lat WHERE id = :id AND version = :version"
_SQLITE_POINT = (
    "INSERT OR REPLACE INTO unit_locations (id, min_lng, max_lng, min_lat, max_lat, unit_id) "
    "VALUES (:rowid, :lng, :lng, :lat, :lat, :id)"
)


def _located(rows: Sequence[Any]) -> list[dict[str, Any]]:
    """The rows' points, as filters.geo reads them from each document."""
    found = []
    for unit_id, version, doc in rows:
        location = load_stored(doc).get("unitLocation")
        located = point(location.get("coordinates") if isinstance(location, dict) else None)
        if located is not None:
            found.append({"id": unit_id, "version": version, "lng": located[0], "lat": located[1]})
    return found


def _fill(conn: sa.Connection, postgres: bool) -> None:
    last = None
    while True:
        query, arguments = (_FIRST, {"n": BATCH}) if last is None else (_NEXT, {"last": last})
        rows = conn.execute(sa.text(query), {"n": BATCH, **arguments}).all()
        if not rows:
            return
        located = _located(rows)
        if located and postgres:
            conn.execute(
                sa.text(_PG_FILL),
                {name: [row[key] for row in located] for name, key in _ARRAYS},
            )
        elif located:
            conn.execute(sa.text(_SQLITE_FILL), located)
            conn.execute(sa.text(_SQLITE_POINT), [_rtree_row(row) for row in located])
        last = rows[-1][0]


_ARRAYS = (("ids", "id"), ("versions", "version"), ("lngs", "lng"), ("lats", "lat"))


def _rtree_row(row: dict[str, Any]) -> dict[str, Any]:
    key = uuid.UUID(hex=str(row["id"]))
    rowid = int.from_bytes(key.bytes[8:], "big", signed=True)  # as units/changes.py keys it
    return {**row, "rowid": rowid, "id": key.hex}


def upgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name != "postgresql":
        op.add_column("units", sa.Column("lng", sa.Double()))
        op.add_column("units", sa.Column("lat", sa.Double()))
        op.execute(_RTREE)
        _fill(conn, postgres=False)
        return
    op.execute(_DISTANCE)
    op.execute("ALTER TABLE units ADD COLUMN IF NOT EXISTS lng double precision")
    op.execute("ALTER TABLE units ADD COLUMN IF NOT EXISTS lat double precision")
    with op.get_context().autocommit_block():
        _fill(op.get_bind(), postgres=True)
        if op.get_bind().execute(sa.text(_INVALID_INDEX)).first():
            op.execute("DROP INDEX CONCURRENTLY ix_units_location")  # left by an interrupted run
        op.execute(_INDEX)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP INDEX IF EXISTS ix_units_location")
        op.execute("DROP FUNCTION IF EXISTS units_distance")
    else:
        op.execute("DROP TABLE unit_locations")
    op.execute("ALTER TABLE units DROP COLUMN lat")
    op.execute("ALTER TABLE units DROP COLUMN lng")
