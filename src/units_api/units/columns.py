"""A unit's columns in a file (exports write them, imports read them): its fields in the
order the API writes them, the kind of each column, and the read-only status columns."""

from __future__ import annotations

from typing import Literal

from units_api.filters.fields import Kind
from units_api.units.filtering import UNIT_CATALOGUE
from units_api.units.schemas import DOCUMENT_ORDER

ColumnKind = Kind | Literal["json"]


def _kind(name: str) -> ColumnKind:
    field = UNIT_CATALOGUE.fields.get(name)
    if field is not None and field.path == (name,) and field.array is None:
        return field.kind
    return "json"


# Read-only columns csv and xlsx add after the record's fields, so a spreadsheet can filter on
# them: each the `status` of the document field named. Imports accept and drop them.
STATUS_COLUMNS = {"publishingStatus": "publishing", "availabilityStatus": "availability"}
# Every column a file may have: the document's fields, then the read-only ones.
COLUMN_KINDS: dict[str, ColumnKind] = {name: _kind(name) for name in DOCUMENT_ORDER} | {
    name: "text" for name in STATUS_COLUMNS
}
