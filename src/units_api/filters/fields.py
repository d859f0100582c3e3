"""What a filter may name: every scalar of the unit, with its type and where it is stored."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from units_api.units.schemas import (
    Expense,
    Floor,
    Option,
    PaymentPlan,
    Reading,
    Spec,
    UnitFields,
    UnitLocation,
)
from units_api.units.tables import FIELD_COLUMNS

Kind = Literal["text", "number", "integer", "boolean", "time", "uuid"]


@dataclass(frozen=True, slots=True)
class Field:
    """A selector: a column, a JSON path in the record, or a path in its array elements."""

    kind: Kind
    column: str | None = None  # a column of `units`
    path: tuple[str, ...] = ()  # else a path into the record, or into each array element
    array: tuple[str, ...] | None = None  # the path of the array whose elements match (ANY)


ARRAYS_OF_OBJECTS: dict[str, type[BaseModel]] = {
    "specs": Spec,
    "options": Option,
    "paymentPlans": PaymentPlan,
    "floorsPlan": Floor,
    "readings": Reading,
}
OBJECTS: dict[str, type[BaseModel]] = {"unitLocation": UnitLocation, "expense": Expense}
COLUMNS = FIELD_COLUMNS
SERVER_FIELDS: dict[str, Field] = {
    "id": Field("uuid", column="id"),
    "createdAt": Field("time", column="created_at"),
    "updatedAt": Field("time", column="updated_at"),
    "version": Field("integer", column="version"),
    "status": Field("text", column="publishing_status"),
    "availability": Field("text", column="availability_status"),
    "channel": Field("text", array=("publishing", "channels")),
}


def _kind(model: type[BaseModel], name: str) -> Kind | None:
    schema: dict[str, Any] = model.model_json_schema()["properties"][name]
    types = {option.get("type") for option in schema.get("anyOf", [schema])}
    for json_type, kind in (
        ("integer", "integer"),
        ("number", "number"),
        ("boolean", "boolean"),
        ("string", "text"),
    ):
        if json_type in types:
            return kind  # type: ignore[return-value]
    return None


def _build() -> dict[str, Field]:
    fields = dict(SERVER_FIELDS)
    for name in UnitFields.model_fields:
        kind = _kind(UnitFields, name)
        if name in COLUMNS and kind:
            fields[name] = Field(kind, column=COLUMNS[name])
        elif kind:
            fields[name] = Field(kind, path=(name,))
    fields["gallery"] = Field("text", array=("gallery",))
    for obj, model in OBJECTS.items():
        for name in model.model_fields:
            kind = _kind(model, name)
            if kind:
                fields[f"{obj}.{name}"] = Field(kind, path=(obj, name))
    for array, model in ARRAYS_OF_OBJECTS.items():
        for name in model.model_fields:
            kind = _kind(model, name)
            if kind:
                fields[f"{array}.{name}"] = Field(kind, path=(name,), array=(array,))
    return fields


FIELDS: dict[str, Field] = _build()
