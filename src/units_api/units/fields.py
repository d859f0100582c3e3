"""The unit's fields that have a column of their own: what the list and the query may sort,
group and aggregate by, and how they compare."""

from __future__ import annotations

from dataclasses import dataclass

from units_api.units.tables import FIELD_COLUMNS

SORTABLE = {
    "createdAt": "created_at",
    "updatedAt": "updated_at",
    "name": "name",
    "price": "price",
    "surface": "surface",
    "startingPrice": "starting_price",
    "maxPrice": "max_price",
    "guaranty": "guaranty",
    "city": "city",
    "type": "type",
}


# Sort keys that are not columns: computed per request (units.repository.Computed).
RELEVANCE = "relevance"  # needs a search text (section 5)
DISTANCE = "distance"  # needs exactly one =near= in the filter (section 4)
COMPUTED_SORTS = (RELEVANCE, DISTANCE)


@dataclass(frozen=True, slots=True)
class SortKey:
    field: str
    descending: bool


# Text sorts compare code points on both dialects (COLLATE "C" on PostgreSQL).
TEXT_SORT_FIELDS = ("name", "city", "type")
# Never null, so sorted without NULLS LAST (which would keep PostgreSQL off their indexes).
NOT_NULL_SORT_FIELDS = ("createdAt", "updatedAt", "name", "type")

_TEXT = ("name", "type", "location", "city", "subProjectId", "priceBase")
GROUPABLE = {
    **{field: FIELD_COLUMNS[field] for field in _TEXT},
    "status": "publishing_status",
    "availability": "availability_status",
}
NUMERIC = {
    **{field: column for field, column in FIELD_COLUMNS.items() if field not in _TEXT},
    "version": "version",
}
TIMES = {"createdAt": "created_at", "updatedAt": "updated_at"}
AGGREGATABLE = {**GROUPABLE, **NUMERIC, **TIMES, "id": "id"}
