"""Unit storage: typed columns for filtering and sorting, plus the rendered record.

`doc` holds the whole unit exactly as the API returns it (money as sent), so a read is one
indexed lookup and no re-serialisation. The scalar columns mirror the record for SQL.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Double,
    Index,
    Integer,
    LargeBinary,
    String,
    Table,
    Text,
    Uuid,
    false,
    func,
    text,
)

from units_api.db import Number, UTCDateTime, metadata

# The listing fields (migration 0021), each with a column of its own.
LISTING_COLUMNS = {
    "currency": "currency",
    "country": "country",
    "offeringType": "offering_type",
    "bedrooms": "bedrooms",
    "bathrooms": "bathrooms",
    "completionStatus": "completion_status",
    "handoverDate": "handover_date",
}
# The record's scalar fields that have a column of their own, and that column.
FIELD_COLUMNS = {
    "name": "name",
    "type": "type",
    "location": "location",
    "city": "city",
    "subProjectId": "sub_project_id",
    "priceBase": "price_base",
    "price": "price",
    "surface": "surface",
    "guaranty": "guaranty",
    "startingPrice": "starting_price",
    "maxPrice": "max_price",
    **LISTING_COLUMNS,
}

# The fields a channel's rules ask whether they are set (`channels.readiness`), each with a
# column that says so (migration 0026), which filters read for `=null=` (`Field.present`).
PRESENT_COLUMNS = {
    "unitImageUrl": "has_unit_image_url",
    "gallery": "has_gallery",
    "unitDesc": "has_unit_desc",
    "unitShortDesc": "has_unit_short_desc",
}

units = Table(
    "units",
    metadata,
    Column("id", Uuid, primary_key=True),
    Column("version", Integer, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("name", String(200), nullable=False),
    Column("type", String(500), nullable=False),
    Column("location", String(500)),
    Column("city", String(500)),
    Column("sub_project_id", String(500)),
    Column("price_base", String(500)),
    Column("price", Number),
    Column("surface", Number),
    Column("guaranty", Number),
    Column("starting_price", Number),
    Column("max_price", Number),
    Column("publishing_status", String(20), nullable=False),
    Column("published_at", UTCDateTime),
    Column("scheduled_at", UTCDateTime),
    Column("availability_status", String(20), nullable=False),
    Column("reserved_until", UTCDateTime),
    Column("doc", Text, nullable=False),
    # The unitLocation's point, for map search (filters.geo); null without one (0010).
    Column("lng", Double),
    Column("lat", Double),
    # The listing fields (0021): nullable, so adding them rewrote no row.
    Column("currency", String(3)),
    Column("country", String(2)),
    Column("offering_type", String(10)),
    Column("bedrooms", Integer),
    Column("bathrooms", Integer),
    Column("completion_status", String(10)),
    Column("handover_date", String(10)),
    # The channels the unit is published or scheduled to (`publishing.channels`), as a JSON
    # array, and whether each field of PRESENT_COLUMNS is set (0026): a channel's rules read
    # them, not the document.
    Column("channels", Text, nullable=False, server_default="[]"),
    *(
        Column(name, Boolean, nullable=False, server_default=false())
        for name in PRESENT_COLUMNS.values()
    ),
    Index("ix_units_created_at_id", "created_at", "id"),
    Index("ix_units_updated_at_id", "updated_at", "id"),
    Index("ix_units_city_price", "city", "price"),
    # PostgreSQL also has ix_units_price_desc_id (migration 0018): price descending, units
    # without one last, the list's `sortBy=price` order.
    Index("ix_units_price_id", "price", "id"),
    Index("ix_units_sub_project_id", "sub_project_id"),
    Index("ix_units_type", "type"),
    Index("ix_units_publishing_status", "publishing_status"),
    Index("ix_units_availability_status", "availability_status"),
    Index("ix_units_scheduled_at", "scheduled_at"),
    Index("ix_units_reserved_until", "reserved_until"),
)

unit_history = Table(
    "unit_history",
    metadata,
    Column(
        "id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    ),
    Column("unit_id", Uuid, nullable=False),
    Column("version", Integer, nullable=False),
    Column("at", UTCDateTime, nullable=False),
    Column("actor", Text, nullable=False),
    Column("action", String(40), nullable=False),
    Column("changes", Text, nullable=False),
    Index("ix_unit_history_unit_id_id", "unit_id", "id"),
)

# Filters compare text case-insensitively, through lower(); these serve them (the first also
# serves "in a city, within a price range, sorted by price").
Index(
    "ix_units_lower_city_price_id",
    func.lower(units.c.city),
    units.c.price,
    units.c.id,
    postgresql_include=["city"],
)
Index("ix_units_lower_type", func.lower(units.c.type))
# PostgreSQL: the published units by id, which the sitemaps walk (migration 0024; a statement
# that repeats the literal predicate may use it).
Index(
    "ix_units_published_id",
    units.c.id,
    postgresql_where=text("publishing_status = 'published'"),
).ddl_if(dialect="postgresql")
Index("ix_units_lower_sub_project_id", func.lower(units.c.sub_project_id))
# Map search's coarse test on PostgreSQL (`point(lng, lat) <@ box`); the included columns let
# a page of a map search be read from the index alone (migration 0010). SQLite indexes the
# points in an R*Tree table, `unit_locations` (units/filtering.py).
Index(
    "ix_units_location",
    func.point(units.c.lng, units.c.lat),
    postgresql_using="gist",
    postgresql_include=["lng", "lat", "created_at", "id"],
).ddl_if(dialect="postgresql")
# Where the server has btree_gist, migration 0016 adds `ix_units_location_created_at`, the
# points with their creation time, for map search pages in creation order
# (units/repository.located_page_query); it is not declared here, as it may be absent.

COUNTER_SHARDS = 16

# The number of units, spread over shards so concurrent creates rarely wait on one row, and
# the change version: the sum of `changes`, bumped by a trigger on every write (migration 0004).
unit_counters = Table(
    "unit_counters",
    metadata,
    Column("shard", Integer, primary_key=True, autoincrement=False),
    Column("n", BigInteger, nullable=False),
    Column("changes", BigInteger, nullable=False, server_default="0"),
)

# The query endpoint's aggregate answers, one row per question (a digest of it), with the
# change version they were read at; written only by units/remembering.py (migration 0009).
remembered_results = Table(
    "remembered_results",
    metadata,
    Column("question", String(64), primary_key=True),
    Column("version", BigInteger, nullable=False),
    Column("body", LargeBinary, nullable=False),
    Column("stored_at", UTCDateTime, nullable=False),
)
