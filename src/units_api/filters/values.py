"""A comparison resolved against a catalogue: the field it names and its values, typed.

The SQL translation and the evaluator both start here, so they accept the same filters and
reject the others with the same 400 (naming the parameter and the comparison's position).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from units_api.errors import InvalidParameter
from units_api.filters import geo
from units_api.filters.fields import Catalogue, Field, Kind
from units_api.filters.tree import Comparison

_BOOLEANS = {"true": True, "false": False}
# Far beyond any stored number, and within what both databases bind (an exponent such as
# 1E+999999999 would also make int() run for minutes).
_EXPONENT_MAX = 1000
_INTEGER_MAX = 2**63 - 1


def parse_number(raw: str) -> Decimal:
    value = Decimal(raw)
    if not value.is_finite() or abs(value.adjusted()) > _EXPONENT_MAX:
        raise ValueError(raw)
    return value


def parse_integer(raw: str) -> int:
    value = parse_number(raw)
    if value != int(value) or abs(value) > _INTEGER_MAX:
        raise ValueError(raw)
    return int(value)


def parse_time(raw: str) -> datetime:
    """An ISO 8601 time as UTC; one without an offset is taken as UTC."""
    parsed = datetime.fromisoformat(raw.replace("Z", "+00:00").replace("z", "+00:00"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


PARSERS: dict[Kind, Callable[[str], Any]] = {
    "text": str,
    "number": parse_number,
    "integer": parse_integer,
    "boolean": lambda raw: _BOOLEANS[raw.lower()],
    "time": parse_time,
    "uuid": uuid.UUID,
}


def comparison_error(comparison: Comparison, parameter: str, message: str) -> InvalidParameter:
    error = InvalidParameter(parameter, f"{message} at position {comparison.position}")
    error.extra["position"] = comparison.position
    return error


def resolve(
    comparison: Comparison, catalogue: Catalogue, parameter: str
) -> tuple[Field, list[Any]]:
    """The field a comparison names and its values as that field's kind.

    `=null=` takes one boolean whatever the field. A location field takes `=null=` and the
    map operators, whose one value is their shape (filters.geo), and only it takes those. An
    unknown field or a value that is not of the kind is a 400.
    """
    field = catalogue.fields.get(comparison.selector)
    if field is None:
        raise comparison_error(comparison, parameter, f"unknown field '{comparison.selector}'")
    if field.kind == "location" or comparison.operator in geo.SHAPES:
        return field, _map_values(comparison, catalogue, field, parameter)
    kind: Kind = "boolean" if comparison.operator == "null" else field.kind
    raws = comparison.values[:1] if comparison.operator == "null" else comparison.values
    return field, [_parse(comparison, parameter, kind, raw) for raw in raws]


def _map_values(
    comparison: Comparison, catalogue: Catalogue, field: Field, parameter: str
) -> list[Any]:
    operator = comparison.operator
    if field.kind != "location":
        located = [name for name, known in catalogue.fields.items() if known.kind == "location"]
        message = f"={operator}= applies to a location ({', '.join(located)}), not to"
        raise comparison_error(comparison, parameter, f"{message} {comparison.selector}")
    if operator == "null":
        return [_parse(comparison, parameter, "boolean", comparison.values[0])]
    if operator not in geo.SHAPES:
        message = f"{comparison.selector} takes =within=, =near=, =inside= or =null="
        raise comparison_error(comparison, parameter, message)
    try:
        return [geo.parse_shape(operator, comparison.values)]
    except ValueError as error:
        raise comparison_error(comparison, parameter, str(error)) from None


def _parse(comparison: Comparison, parameter: str, kind: Kind, raw: str) -> Any:
    try:
        return PARSERS[kind](raw)
    except (ValueError, InvalidOperation, KeyError, OverflowError):
        message = f"'{raw}' is not a valid {kind} for {comparison.selector}"
        raise comparison_error(comparison, parameter, message) from None
