"""The unit's fields that have a column of their own: what the list and the query may sort,
group and aggregate by, and how they compare; and a stored record projected on some fields."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import orjson

from units_api.units.tables import FIELD_COLUMNS, LISTING_COLUMNS

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
    **LISTING_COLUMNS,
}


# Sort keys that are not columns: computed per request (units.repository.Computed).
RELEVANCE = "relevance"  # needs a search text (section 5)
DISTANCE = "distance"  # needs exactly one =near= in the filter (section 4)
COMPUTED_SORTS = (RELEVANCE, DISTANCE)


@dataclass(frozen=True, slots=True)
class SortKey:
    field: str
    descending: bool


# Numbers that are whole (integer columns): counts a unit has, grouped by as well.
WHOLE = ("bedrooms", "bathrooms")
_LISTING_TEXT = tuple(field for field in LISTING_COLUMNS if field not in WHOLE)
# Text sorts compare code points on both dialects (COLLATE "C" on PostgreSQL).
TEXT_SORT_FIELDS = ("name", "city", "type", *_LISTING_TEXT)
# Never null, so sorted without NULLS LAST (which would keep PostgreSQL off their indexes).
NOT_NULL_SORT_FIELDS = ("createdAt", "updatedAt", "name", "type")

_TEXT = ("name", "type", "location", "city", "subProjectId", "priceBase", *_LISTING_TEXT)
GROUPABLE = {
    **{field: FIELD_COLUMNS[field] for field in (*_TEXT, *WHOLE)},
    "status": "publishing_status",
    "availability": "availability_status",
}
NUMERIC = {
    **{field: column for field, column in FIELD_COLUMNS.items() if field not in _TEXT},
    "version": "version",
}
TIMES = {"createdAt": "created_at", "updatedAt": "updated_at"}
AGGREGATABLE = {**GROUPABLE, **NUMERIC, **TIMES, "id": "id"}


_TOP_LEVEL = msgspec.json.Decoder(dict[str, msgspec.Raw])


def project(doc: str, fields: Sequence[str] | None, shown: dict[str, Any]) -> Any:
    """A stored record, or its `fields` in their order, with the values a sort adds to it
    (`distanceMeters`), ready for orjson to write."""
    if fields is None:
        if not shown:
            return orjson.Fragment(doc)
        return orjson.Fragment(doc[:-1] + "," + orjson.dumps(shown).decode()[1:])
    # Only the top level is parsed: each field's value is kept as the JSON it is stored as
    # (a record's many numbers are not read into Decimals to be written back unchanged).
    record = _TOP_LEVEL.decode(doc)
    return {
        name: None if (value := record.get(name)) is None else orjson.Fragment(bytes(value))
        for name in fields
    } | shown
