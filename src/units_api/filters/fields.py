"""What a filter may name: a catalogue of fields, each with its type and where it is found.

A catalogue describes one kind of document (a unit, say): its fields come from the
document's pydantic model, and the table that stores the documents lets SQL read them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

from pydantic import BaseModel
from sqlalchemy import Table

Kind = Literal["text", "number", "integer", "boolean", "time", "uuid", "location"]

_JSON_KINDS: tuple[tuple[str, Kind], ...] = (
    ("integer", "integer"),
    ("number", "number"),
    ("boolean", "boolean"),
    ("string", "text"),
)


@dataclass(frozen=True, slots=True)
class Location:
    """Where SQL finds a location field's points: the longitude and latitude columns of the
    catalogue's table (null without a point) and, on SQLite, the R*Tree table indexing them
    (`rtree`, with columns min_lng, max_lng, min_lat, max_lat and an auxiliary `rtree_key`
    holding the row's `key` column). Its one writer keeps them as `filters.geo.coordinate`
    reads the document's point."""

    lng: str
    lat: str
    rtree: str
    rtree_key: str
    key: str = "id"


@dataclass(frozen=True, slots=True)
class Field:
    """A selector: where its value sits in the document, and in which column if it has one.

    `path` leads from the document, or from each element of the array at `array` when that is
    set (an empty path then means the elements themselves). `column` names a column of the
    catalogue's table holding the same value, which SQL compares instead of the document (for
    an array, the array as JSON text). `present` names a boolean column that is true when the
    field holds a value (an array: an element that is not null), which SQL reads for `=null=`
    where it answers it (`presence`).
    A "location" field's path leads to a GeoJSON Point's coordinates, and SQL reads it at
    `location`. A `lowercase` text field only ever holds lower-case values (a status the
    server writes), so SQL matches its column as it is, without lower(), and its index serves.
    """

    kind: Kind
    column: str | None = None
    path: tuple[str, ...] = ()
    array: tuple[str, ...] | None = None
    location: Location | None = None
    lowercase: bool = False
    present: str | None = None

    def presence(self, wanted: bool) -> str | None:
        """The presence column that answers `=null=<wanted>`, if one does: for a scalar
        always; for an array (where `=null=true` asks for a null element) only `=null=false`."""
        return self.present if self.array is None or not wanted else None


@dataclass(frozen=True, slots=True)
class Catalogue:
    """The fields of one kind of document, and the table whose rows hold those documents."""

    fields: Mapping[str, Field]
    table: Table
    document: str = "doc"  # the column holding each row's document as JSON text


def model_fields(
    model: type[BaseModel],
    columns: Mapping[str, str] = MappingProxyType({}),
    server: Mapping[str, Field] = MappingProxyType({}),
    present: Mapping[str, str] = MappingProxyType({}),
) -> Mapping[str, Field]:
    """The fields of documents shaped like `model`, plus the `server` fields the model lacks;
    `present[name]` is the field's presence column (`Field.present`).

    Selectors are every scalar property (stored in `columns[name]` when it has one), every
    array of scalars, and one level down, the scalars of each object and of each array of
    objects (`expense.value`, `paymentPlans.downPayment`, matched when ANY element does).
    """
    schema = model.model_json_schema()
    definitions: dict[str, Any] = schema.get("$defs", {})
    fields = dict(server)
    for name, prop in schema["properties"].items():
        kind = _kind(prop)
        if kind:
            fields[name] = Field(
                kind, column=columns.get(name), path=(name,), present=present.get(name)
            )
            continue
        shape = _non_null(prop)
        if shape.get("type") == "array":
            items = shape.get("items", {})
            if "$ref" not in items:
                item_kind = _kind(items)
                if item_kind:
                    fields[name] = Field(item_kind, array=(name,), present=present.get(name))
                continue
            for key, kind in _scalars(definitions, items):
                fields[f"{name}.{key}"] = Field(kind, path=(key,), array=(name,))
        elif "$ref" in shape:
            for key, kind in _scalars(definitions, shape):
                fields[f"{name}.{key}"] = Field(kind, path=(name, key))
    return MappingProxyType(fields)


def _kind(schema: dict[str, Any]) -> Kind | None:
    types = {option.get("type") for option in schema.get("anyOf", [schema])}
    return next((kind for json_type, kind in _JSON_KINDS if json_type in types), None)


def _non_null(schema: dict[str, Any]) -> dict[str, Any]:
    options = [option for option in schema.get("anyOf", [schema]) if option.get("type") != "null"]
    return options[0] if len(options) == 1 else {}


def _scalars(definitions: dict[str, Any], ref: dict[str, Any]) -> list[tuple[str, Kind]]:
    """The scalar properties of the object a `$ref` names, with their kinds."""
    properties: dict[str, Any] = definitions[ref["$ref"].rsplit("/", 1)[-1]]["properties"]
    return [(key, kind) for key, prop in properties.items() if (kind := _kind(prop))]
