"""Translating a filter tree to a SQLAlchemy condition, on SQLite and PostgreSQL.

Values are always bound parameters. Columns compare directly; other scalars are read from the
stored record with the dialect's JSON functions; a path into an array matches when ANY
element does (an EXISTS over the array's elements).

Null semantics, per value (and per element for arrays): `==`, ordering and `=in=` are false
on null; `!=` and `=out=` are true on null; `=null=true` matches null.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from sqlalchemy import (
    Boolean,
    ColumnElement,
    Numeric,
    and_,
    cast,
    func,
    literal,
    not_,
    or_,
    select,
    true,
)
from sqlalchemy.dialects.postgresql import JSONB

from units_api.errors import InvalidParameter
from units_api.filters.fields import FIELDS, Field
from units_api.filters.tree import And, Comparison, Node, Or
from units_api.units.tables import units

_BOOLEANS = {"true": True, "false": False}


class _Values:
    """Typed conversion of a comparison's values; errors name the position."""

    def __init__(self, comparison: Comparison, parameter: str) -> None:
        self.comparison = comparison
        self.parameter = parameter

    def fail(self, message: str) -> InvalidParameter:
        error = InvalidParameter(
            self.parameter, f"{message} at position {self.comparison.position}"
        )
        error.extra["position"] = self.comparison.position
        return error

    def convert(self, kind: str, raw: str) -> Any:
        try:
            return _CONVERTERS[kind](raw)
        except (ValueError, InvalidOperation, KeyError):
            raise self.fail(
                f"'{raw}' is not a valid {kind} for {self.comparison.selector}"
            ) from None


def _number(raw: str) -> Decimal:
    value = Decimal(raw)
    if not value.is_finite():
        raise ValueError(raw)
    return value


def _integer(raw: str) -> int:
    value = _number(raw)
    if value != int(value):
        raise ValueError(raw)
    return int(value)


def _time(raw: str) -> datetime:
    parsed = datetime.fromisoformat(raw.replace("Z", "+00:00").replace("z", "+00:00"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


_CONVERTERS: dict[str, Callable[[str], Any]] = {
    "text": str,
    "number": _number,
    "integer": _integer,
    "boolean": lambda raw: _BOOLEANS[raw.lower()],
    "time": _time,
    "uuid": uuid.UUID,
}


def _like_pattern(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.replace("*", "%")


class Translator:
    def __init__(self, dialect: str, parameter: str = "p") -> None:
        self.dialect = dialect
        self.parameter = parameter

    def condition(self, node: Node) -> ColumnElement[bool]:
        if isinstance(node, And):
            return and_(*(self.condition(child) for child in node.children))
        if isinstance(node, Or):
            return or_(*(self.condition(child) for child in node.children))
        return self.comparison(node)

    def comparison(self, node: Comparison) -> ColumnElement[bool]:
        field = FIELDS.get(node.selector)
        if field is None:
            error = InvalidParameter(
                self.parameter, f"unknown field '{node.selector}' at position {node.position}"
            )
            error.extra["position"] = node.position
            raise error
        values = _Values(node, self.parameter)
        if field.array is not None:
            return self._any_element(field, node, values)
        return self._compare(self._scalar(field), field.kind, node, values)

    # Where a value lives.

    def _record(self) -> Any:
        return cast(units.c.doc, JSONB) if self.dialect == "postgresql" else units.c.doc

    def _json_value(self, document: Any, path: tuple[str, ...], kind: str) -> Any:
        if self.dialect == "postgresql":
            text = func.jsonb_extract_path_text(document, *(literal(p) for p in path))
            if kind in ("number", "integer"):
                return cast(text, Numeric)
            return cast(text, Boolean) if kind == "boolean" else text
        return func.json_extract(document, "$." + ".".join(path))

    def _scalar(self, field: Field) -> Any:
        if field.column is not None:
            return units.c[field.column]
        return self._json_value(self._record(), field.path, field.kind)

    def _any_element(self, field: Field, node: Comparison, values: _Values) -> ColumnElement[bool]:
        assert field.array is not None
        if self.dialect == "postgresql":
            array = func.coalesce(
                func.jsonb_extract_path(self._record(), *(literal(p) for p in field.array)),
                literal("[]", JSONB),
            )
            unnest = func.jsonb_array_elements if field.path else func.jsonb_array_elements_text
            elements = unnest(array).table_valued("value").alias("element")
            element = elements.c.value
            value = self._json_value(element, field.path, field.kind) if field.path else element
        else:
            elements = (
                func.json_each(units.c.doc, "$." + ".".join(field.array))
                .table_valued("value")
                .alias("element")
            )
            element = elements.c.value
            value = self._json_value(element, field.path, field.kind) if field.path else element
        matches = self._compare(value, field.kind, node, values)
        return select(literal(1)).select_from(elements).where(matches).exists()

    # How it compares.

    def _compare(
        self, expr: Any, kind: str, node: Comparison, values: _Values
    ) -> ColumnElement[bool]:
        op = node.operator
        if op == "null":
            wanted = values.convert("boolean", node.values[0])
            is_null: ColumnElement[bool] = expr.is_(None) if wanted else expr.is_not(None)
            return is_null
        converted = [values.convert(kind, raw) for raw in node.values]
        if self.dialect == "sqlite" and kind in ("number", "boolean"):
            # SQLite's JSON functions give REAL for numbers and 1/0 for booleans.
            converted = [float(v) if kind == "number" else int(v) for v in converted]
        if kind == "text" and op in ("eq", "ne", "in", "out"):
            positive = self._text_match(expr, op, converted)
        elif op in ("eq", "ne"):
            positive = expr == converted[0]
        elif op in ("in", "out"):
            positive = expr.in_(converted)
        else:
            if kind == "text" and self.dialect == "postgresql":
                expr = expr.collate("C")
            positive = {
                "lt": expr < converted[0],
                "le": expr <= converted[0],
                "gt": expr > converted[0],
                "ge": expr >= converted[0],
            }[op]
        if op in ("ne", "out"):
            return or_(expr.is_(None), not_(and_(expr.is_not(None), positive)))
        return and_(expr.is_not(None), positive)

    @staticmethod
    def _text_match(expr: Any, op: str, values: list[str]) -> ColumnElement[bool]:
        lowered = func.lower(expr)
        if op in ("in", "out"):
            matched: ColumnElement[bool] = lowered.in_([value.lower() for value in values])
            return matched
        value = values[0]
        if "*" in value:
            return lowered.like(_like_pattern(value.lower()), escape="\\")
        return lowered == value.lower()


def to_condition(node: Node | None, dialect: str, parameter: str = "p") -> ColumnElement[bool]:
    if node is None:
        return true()
    return Translator(dialect, parameter).condition(node)
