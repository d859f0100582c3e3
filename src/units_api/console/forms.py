"""The unit form: its fields, read from the API's own unit schema, a unit shown as form
values, and a posted form turned back into the JSON body the API validates.

Nothing is validated here: a value that is not a number is sent as the text typed, so the
API's 422 names it beside its field, in the API's words."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import cache
from typing import Any

import orjson
from starlette.datastructures import FormData

from units_api.units.schemas import UnitFields

# Blank rows offered under each nested list, to add items without JavaScript.
BLANK_ROWS = 1
MAX_ROWS = 1000


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    # text, long, url, number, whole, bool, date (or date-time), day, choice, code (ISO's)
    kind: str
    choices: tuple[str, ...] = ()  # a choice's values


@dataclass(frozen=True, slots=True)
class Table:
    name: str
    columns: tuple[Field, ...]


@dataclass(frozen=True, slots=True)
class UnitForm:
    scalars: tuple[Field, ...]
    objects: dict[str, tuple[Field, ...]]  # unitLocation is shown as longitude and latitude
    lists: tuple[str, ...]  # lists of plain values (gallery): one per line
    tables: tuple[Table, ...]


def _kind(schema: dict[str, Any]) -> str:
    options = [s for s in schema.get("anyOf", [schema]) if s.get("type") != "null"]
    chosen = options[0] if options else {}
    kind = chosen.get("type")
    if kind == "number":
        return "number"
    if kind == "integer":
        return "whole"
    if kind == "boolean":
        return "bool"
    if "enum" in chosen:
        return "choice"
    if "anyOf" in chosen:
        return "date"
    if chosen.get("format") == "date":
        return "day"
    if chosen.get("pattern", "").startswith("^[A-Z]"):
        return "code"
    if chosen.get("format") == "uri":
        return "url"
    return "long" if chosen.get("maxLength", 0) > 1000 else "text"


def _field(name: str, schema: dict[str, Any]) -> Field:
    options = [s for s in schema.get("anyOf", [schema]) if s.get("type") != "null"]
    choices = tuple(options[0].get("enum", ())) if options else ()
    return Field(name, _kind(schema), choices)


def _fields(properties: dict[str, Any]) -> tuple[Field, ...]:
    return tuple(_field(name, schema) for name, schema in properties.items())


@cache
def unit_form() -> UnitForm:
    schema = UnitFields.model_json_schema()
    definitions = schema["$defs"]
    scalars: list[Field] = []
    objects: dict[str, tuple[Field, ...]] = {}
    lists: list[str] = []
    tables: list[Table] = []
    for name, field in schema["properties"].items():
        options = [s for s in field.get("anyOf", [field]) if s.get("type") != "null"]
        chosen = options[0] if options else {}
        if "$ref" in chosen:
            model = definitions[chosen["$ref"].rsplit("/", 1)[1]]
            objects[name] = (
                _fields(model["properties"])
                if name != "unitLocation"
                else (
                    Field("lng", "number"),
                    Field("lat", "number"),
                )
            )
        elif chosen.get("type") == "array" and "$ref" in chosen.get("items", {}):
            model = definitions[chosen["items"]["$ref"].rsplit("/", 1)[1]]
            tables.append(Table(name, _fields(model["properties"])))
        elif chosen.get("type") == "array":
            lists.append(name)
        else:
            scalars.append(_field(name, field))
    return UnitForm(tuple(scalars), objects, tuple(lists), tuple(tables))


def _shown(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def values_of(unit: dict[str, Any]) -> dict[str, str]:
    """A unit as the form's values, by input name (`paymentPlans.0.minPrice`)."""
    form = unit_form()
    values = {field.name: _shown(unit.get(field.name)) for field in form.scalars}
    location = unit.get("unitLocation") or {}
    coordinates = location.get("coordinates") or [None, None]
    values["unitLocation.lng"] = _shown(coordinates[0])
    values["unitLocation.lat"] = _shown(coordinates[1])
    for name, fields in form.objects.items():
        if name != "unitLocation":
            inner = unit.get(name) or {}
            for field in fields:
                values[f"{name}.{field.name}"] = _shown(inner.get(field.name))
    for name in form.lists:
        values[name] = "\n".join(str(item) for item in unit.get(name) or ())
    for table in form.tables:
        for index, item in enumerate(unit.get(table.name) or ()):
            for column in table.columns:
                values[f"{table.name}.{index}.{column.name}"] = _shown(item.get(column.name))
    return values


def row_count(values: dict[str, str], table: Table) -> int:
    """How many rows a table holds in `values` (its highest index + 1)."""
    prefix = f"{table.name}."
    indexes = [
        int(parts[1])
        for key in values
        if key.startswith(prefix) and len(parts := key.split(".")) == 3 and parts[1].isdigit()
    ]
    return max(indexes, default=-1) + 1


def posted_values(form: FormData) -> dict[str, str]:
    """The form's fields as typed, without the console's own (csrf, buttons)."""
    return {
        key: value
        for key, value in form.multi_items()
        if isinstance(value, str) and not key.startswith("_") and key != "csrf"
    }


def _number(text: str, whole: bool) -> Any:
    """A number as typed, sent exactly (never through a float); anything else as text, so the
    API says what is wrong with it."""
    cleaned = text.replace(",", "").replace("٬", "").translate(_WESTERN).replace("٫", ".")
    try:
        number = Decimal(cleaned)
    except InvalidOperation:
        return text
    if not number.is_finite():
        return text
    if whole and number == number.to_integral_value():
        return int(number)
    return orjson.Fragment(cleaned.encode())


_WESTERN = str.maketrans("٠١٢٣٤٥٦٧٨٩", "0123456789")


def _value(field: Field, text: str) -> Any:
    text = text.strip()
    if field.kind == "bool":
        return {"true": True, "false": False}.get(text)
    if text == "":
        return None
    if field.kind in ("number", "whole"):
        return _number(text, field.kind == "whole")
    return text


def _row(table: Table, values: dict[str, str], index: int) -> dict[str, Any] | None:
    if values.get(f"{table.name}.{index}.remove"):
        return None
    row = {
        column.name: _value(column, values.get(f"{table.name}.{index}.{column.name}", ""))
        for column in table.columns
    }
    return row if any(value is not None for value in row.values()) else None


def body_of(values: dict[str, str]) -> bytes:
    """The posted form as a whole unit body (for create and replace): a blank row of a table
    is left out."""
    form = unit_form()
    body: dict[str, Any] = {f.name: _value(f, values.get(f.name, "")) for f in form.scalars}
    lng, lat = values.get("unitLocation.lng", "").strip(), values.get("unitLocation.lat", "")
    if lng or lat.strip():
        point = [_number(lng, False), _number(lat.strip(), False)]
        body["unitLocation"] = {"type": "Point", "coordinates": point}
    else:
        body["unitLocation"] = None
    for name, fields in form.objects.items():
        if name != "unitLocation":
            inner = {f.name: _value(f, values.get(f"{name}.{f.name}", "")) for f in fields}
            body[name] = inner if any(v is not None for v in inner.values()) else None
    for name in form.lists:
        body[name] = [line.strip() for line in values.get(name, "").splitlines() if line.strip()]
    for table in form.tables:
        rows = (
            _row(table, values, index) for index in range(min(row_count(values, table), MAX_ROWS))
        )
        body[table.name] = [row for row in rows if row is not None]
    return orjson.dumps(body)


def tables_with_blanks(values: dict[str, str]) -> Iterable[tuple[Table, int]]:
    """Each table and the number of rows to show: its rows and a blank one."""
    for table in unit_form().tables:
        yield table, row_count(values, table) + BLANK_ROWS
